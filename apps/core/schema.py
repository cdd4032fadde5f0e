"""OpenAPI post-processing (drf-spectacular hook): every operation documents the RFC 9457 errors it can return.

`problem_responses` adds the `Problem` component (the body of `apps.core.errors.problem_body`) and, on every
operation that does not already describe them, the responses every endpoint can give: 400 (invalid input), 401
(no or bad credentials), 403 (role or token scope), and 404 on paths with a path parameter (absent, or another
tenant's object). Domain-specific errors (409, 422, 503) stay on the endpoints that document them; an operation
that takes `If-Match` also gets its 412, one that takes `Idempotency-Key` its 422 (`idempotency_key_reused`).

`AutoSchema` (the `DEFAULT_SCHEMA_CLASS`) declares optimistic concurrency (`apps.core.conditional`): the `ETag`
response header on the 200 of a single object's GET, PATCH and PUT, and the optional `If-Match` header on its
PATCH, PUT and DELETE.

Statuses an operation answers beyond those: a view declares them with `problems({409: "in_use: ...", ...})` in
its `extend_schema(responses=...)` (the description names the codes); any 4xx/5xx response declared without a
body gets the Problem body here. `AutoSchema` adds 429 `throttled` (with its `Retry-After` header) to every
operation whose view has a throttle that applies to its method (a throttle's `methods`, all when it has none).
tests/core/test_schema_statuses.py derives from the code which operations can answer 409, 410 or 422 and holds
the declarations to it.

A PATCH body is documented as its input serializer validates it: `ApiViewMixin._input` is not partial, so a member
the serializer requires is required on PATCH too (drf-spectacular would mark every member optional).

It also states what the code enforces: `page_size` on every list is an integer 1-500 (`apps.core.pagination`);
a JSON request body refuses members its schema does not define (`additionalProperties: false`, as
`apps.core.api.validated` does), except on the agent endpoints and the fleet import, which stay lenient.
"""
from __future__ import annotations

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse

from .conditional import OBJECT_ACTIONS, TAGGED_ACTIONS, WRITE_METHODS, ConditionalMixin
from .errors import PROBLEM_CONTENT_TYPE

ETAG = OpenApiParameter(
    "ETag", OpenApiTypes.STR, OpenApiParameter.HEADER, response=[200],
    description="Strong entity tag of the object's representation; send it back in If-Match to write.")
IF_MATCH = OpenApiParameter(
    "If-Match", OpenApiTypes.STR, OpenApiParameter.HEADER, required=False,
    description="Write only if the object's current ETag is one of these (or `*`); else 412 precondition_failed "
                "and nothing is written.")
PRECONDITION = "The object changed since it was read: If-Match does not match its ETag (precondition_failed)."
IDEMPOTENT_422 = ("The request cannot be done as sent: idempotency_key_reused (this Idempotency-Key was sent with "
                  "another body), or quota_exceeded where the create counts against a quota (resource, limit, "
                  "usage, requested; exceeded: every limit passed).")
BAREMETAL_UNAVAILABLE = ("baremetal_unavailable (with Retry-After): a bare-metal request while the provisioning "
                         "service (Ironic) does not answer, e.g. while `make run` is still starting it; nothing "
                         "was done.")
THROTTLED = ("Too many attempts (throttled): nothing was done; send it again after Retry-After seconds.")
RETRY_AFTER = {"description": "Seconds to wait before the next attempt.",
               "schema": {"type": "integer", "minimum": 0}}


def problems(declared: dict[int, str]) -> dict[int, OpenApiResponse]:
    """`extend_schema(responses=...)` entries for the errors an operation answers: status -> description naming
    the codes (``{409: "in_use: the VPC still has subnets."}``); the body is the Problem (`problem_responses`)."""
    return {status: OpenApiResponse(description=text) for status, text in declared.items()}


def throttles_for(view, method: str) -> list:
    """The view's throttles that count requests of `method` (a throttle's `methods`; all methods when unset)."""
    return [t for t in view.get_throttles() if method.upper() in getattr(t, "methods", {method.upper()})]


class AutoSchema(SpectacularAutoSchema):
    def _get_request_for_media_type(self, serializer, direction="request"):
        # our PATCH inputs are validated whole (ApiViewMixin._input), not as DRF's partial update
        method, self.method = self.method, ("POST" if self.method == "PATCH" else self.method)
        try:
            return super()._get_request_for_media_type(serializer, direction)
        finally:
            self.method = method

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if throttles_for(self.view, self.method):
            responses.setdefault("429", {"$ref": "#/components/responses/Problem429"})
        return responses

    def get_override_parameters(self):
        params = list(super().get_override_parameters())
        action = getattr(self.view, "action", None)
        if isinstance(self.view, ConditionalMixin) and action in OBJECT_ACTIONS:
            if action in TAGGED_ACTIONS:
                params.append(ETAG)
            if self.method in WRITE_METHODS:
                params.append(IF_MATCH)
        return params

PROBLEM_SCHEMA = {
    "type": "object",
    "description": "RFC 9457 problem details; `code` is stable and machine-readable.",
    "required": ["type", "title", "status", "detail", "instance", "code", "request_id"],
    "properties": {
        "type": {"type": "string", "format": "uri"},
        "title": {"type": "string"},
        "status": {"type": "integer", "description": "the HTTP status"},
        "detail": {"type": "string"},
        "instance": {"type": "string", "description": "the request path"},
        "code": {"type": "string", "description": "stable snake_case code, e.g. validation_error, not_found"},
        "request_id": {"type": "string", "description": "also the X-Request-ID header; find it in the logs"},
        "errors": {"type": "object",
                   "additionalProperties": {"type": "array", "items": {"anyOf": [{"type": "string"},
                                                                                {"type": "object"}]}},
                   "description": "validation errors, every bad member of the request at once: member or "
                                  "parameter -> messages; a message is a string, or "
                                  "for a list or nested member an object of the same shape keyed by index or "
                                  "member (e.g. {\"organizations\": [{\"0\": [\"Must be a valid UUID.\"]}]})"},
        "exceeded": {"type": "array", "description": "quota_exceeded: every limit the request passes, in words in "
                                                     "`message` ('8 H100-SXM5-80GB GPUs allowed, 8 in use, 1 more "
                                                     "requested (project web)'); `resource`, `limit`, `usage`, "
                                                     "`requested` and `scope` beside it are the first one's",
                     "items": {"type": "object",
                               "required": ["resource", "scope", "limit", "usage", "requested", "message"],
                               "properties": {"resource": {"type": "string", "description": "the quota key, e.g. "
                                                                                            "gpus:H100-SXM5-80GB"},
                                              "scope": {"type": "string", "enum": ["project", "organization"]},
                                              "limit": {"type": "integer"}, "usage": {"type": "integer"},
                                              "requested": {"type": "integer"}, "message": {"type": "string"}}}},
    },
    "additionalProperties": True,
}

STANDARD = {
    "400": "Invalid input (validation_error, parse_error, invalid_cursor, ...); nothing was changed.",
    "401": "No credentials, or an unknown, expired or revoked token (not_authenticated).",
    "403": "The caller's role or token scope does not allow this (permission_denied).",
    "404": "Not found, or not visible to the caller (another tenant's object is never revealed).",
}
#: Also on every operation with a request body: an id in the body that is absent or not visible (404), and a
#: write that conflicts with what exists (409: a name taken, a wrong state, an object in use).
BODY = {
    "404": STANDARD["404"],
    "409": "Conflict with the current state (name_taken, invalid_state with allowed_states, in_use, ...).",
}
METHODS = {"get", "post", "put", "patch", "delete"}
LENIENT_PATHS = ("/api/v1/agent/", "/api/v1/fleet/import/")


def _strict_bodies(result) -> None:
    schemas = result.get("components", {}).get("schemas", {})
    for path, item in result.get("paths", {}).items():
        if path.startswith(LENIENT_PATHS):
            continue
        for method, operation in item.items():
            if method not in METHODS:
                continue
            content = operation.get("requestBody", {}).get("content", {})
            ref = content.get("application/json", {}).get("schema", {}).get("$ref", "")
            component = schemas.get(ref.rsplit("/", 1)[-1]) if ref else None
            if component is not None and component.get("type") == "object":
                component["additionalProperties"] = False


def _page_size_bounds(result) -> None:
    from .pagination import CursorPagination
    for item in result.get("paths", {}).values():
        for operation in item.values():
            for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
                if parameter.get("in") == "query" and parameter.get("name") == "page_size":
                    parameter["schema"] = {"type": "integer", "minimum": 1,
                                           "maximum": CursorPagination.max_page_size}


def problem_responses(result, generator, request, public):
    components = result.setdefault("components", {})
    components.setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
    content = {PROBLEM_CONTENT_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    shared = components.setdefault("responses", {})
    for status, description in {**STANDARD, **BODY}.items():
        shared[f"Problem{status}"] = {"description": description, "content": content}
    shared["Problem412"] = {"description": PRECONDITION, "content": content}
    shared["Problem422"] = {"description": IDEMPOTENT_422, "content": content}
    shared["Problem429"] = {"description": THROTTLED, "content": content, "headers": {"Retry-After": RETRY_AFTER}}
    for item in result.get("paths", {}).values():
        for method, operation in item.items():
            if method not in METHODS:
                continue
            responses = operation.setdefault("responses", {})
            for status, response in responses.items():
                if status[0] in "45" and "$ref" not in response and "content" not in response:
                    response["content"] = content
            if any(p.get("in") == "header" and p.get("name") == "If-Match" for p in operation.get("parameters", [])):
                responses.setdefault("412", {"$ref": "#/components/responses/Problem412"})
            if any(p.get("in") == "header" and p.get("name") == "Idempotency-Key" for p in operation.get("parameters", [])):
                responses.setdefault("422", {"$ref": "#/components/responses/Problem422"})
            has_body = "requestBody" in operation
            for status in {**STANDARD, **BODY}:
                # 404 everywhere: a path without an id still answers it to a tenant on a staff endpoint (ADR 0930)
                if status == "409" and not has_body:
                    continue
                responses.setdefault(status, {"$ref": f"#/components/responses/Problem{status}"})
    _strict_bodies(result)
    _page_size_bounds(result)
    return result
