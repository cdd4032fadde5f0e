"""OpenAPI post-processing (drf-spectacular hook): every operation documents the RFC 9457 errors it can return.

`problem_responses` adds the `Problem` component (the body of `apps.core.errors.problem_body`) and, on every
operation that does not already describe them, the responses every endpoint can give: 400 (invalid input), 401
(no or bad credentials), 403 (role or token scope), and 404 on paths with a path parameter (absent, or another
tenant's object). Domain-specific errors (409, 422, 503) stay on the endpoints that document them; an operation
that takes `If-Match` also gets its 412.

`AutoSchema` (the `DEFAULT_SCHEMA_CLASS`) declares optimistic concurrency (`apps.core.conditional`): the `ETag`
response header on the 200 of a single object's GET, PATCH and PUT, and the optional `If-Match` header on its
PATCH, PUT and DELETE.

It also states what the code enforces: `page_size` on every list is an integer 1-500 (`apps.core.pagination`);
a JSON request body refuses members its schema does not define (`additionalProperties: false`, as
`apps.core.api.validated` does), except on the agent endpoints and the fleet import, which stay lenient.
"""
from __future__ import annotations

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter

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


class AutoSchema(SpectacularAutoSchema):
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
                   "description": "validation errors: member or parameter -> messages; a message is a string, or "
                                  "for a list or nested member an object of the same shape keyed by index or "
                                  "member (e.g. {\"organizations\": [{\"0\": [\"Must be a valid UUID.\"]}]})"},
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
    for path, item in result.get("paths", {}).items():
        for method, operation in item.items():
            if method not in METHODS:
                continue
            responses = operation.setdefault("responses", {})
            if any(p.get("in") == "header" and p.get("name") == "If-Match" for p in operation.get("parameters", [])):
                responses.setdefault("412", {"$ref": "#/components/responses/Problem412"})
            has_body = "requestBody" in operation
            for status in {**STANDARD, **BODY}:
                if status == "404" and "{" not in path and not has_body:
                    continue
                if status == "409" and not has_body:
                    continue
                responses.setdefault(status, {"$ref": f"#/components/responses/Problem{status}"})
    _strict_bodies(result)
    _page_size_bounds(result)
    return result
