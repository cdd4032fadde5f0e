"""RFC 9457 problem details for every error the API returns.

Body (`application/problem+json`)::

    {"type": "https://docs.gpucloud.dev/errors/<code>", "title": str, "status": int, "detail": str,
     "instance": "<request path>", "code": "<stable snake_case code>", "request_id": str,
     "errors": {"<field>": ["message", ...]}   # validation only
     ...extra members a domain error adds (e.g. quota: resource, limit, usage, requested)}

A 400 names every bad field of the request at once, not the first one: DRF's serializers collect their fields'
errors, a serializer validator that has a stable code of its own raises `field_error` (an invalid CIDR beside a
bad name is one answer), and a service that finds several problems raises one `fields_invalid`. Its `code` is the
one code every field error carries (e.g. `invalid_security_group_rule`, `vpc_cidr_not_allowed`), else
`validation_error`; its `detail` is the messages, or "Invalid input: <fields>." when plain DRF errors are among
them.

Domain code raises `DomainError` subclasses (each with a stable `code` and HTTP `status`); the DRF
exception handler and `ProblemJsonMiddleware` turn everything else into the same shape. Never a traceback.
"""
from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError
from django.dispatch import Signal
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf_exc
from rest_framework.permissions import SAFE_METHODS
from rest_framework.response import Response

from .request_context import get_request_id

log = logging.getLogger("gpucloud.errors")

PROBLEM_CONTENT_TYPE = "application/problem+json"
TYPE_BASE = "https://docs.gpucloud.dev/errors/"

# Sent when the API refuses a signed-in caller's change (an unsafe method) with 403: the role, staff role or token
# scope does not allow it. Keyword arguments: `request`, `actor`, `code`, `detail` and `organization_id` (the
# organization the refused action was about when the refusal knows it, else None). The audit app records it, so
# the audit log shows who tried what they may not do; the answer is the same whatever a receiver does. An error
# marked `audited = True` (its service already recorded a more specific refusal event) is not announced again.
request_refused = Signal()


def dry_run(view_action):
    """Mark a view action that is sent with POST but changes nothing (a check or a preview): its 403 is an answer,
    not a refused change, so it is not announced on `request_refused` (a viewer choosing flavors in the launch
    wizard would otherwise fill the audit log)."""
    view_action.dry_run = True
    return view_action



class DomainError(Exception):
    """Base for errors services raise. Subclasses set `code`, `status` and `title`."""

    code = "error"
    status = 400
    title = "Bad request"

    def __init__(self, detail: str = "", *, code: str | None = None, status: int | None = None,
                 errors: dict | None = None, **extra: Any):
        super().__init__(detail or self.title)
        self.detail = detail or self.title
        if code:
            self.code = code
        if status:
            self.status = status
        self.errors = errors
        self.extra = extra


class ValidationFailed(DomainError):
    code, status, title = "validation_error", 400, "Invalid input"


class NotFound(DomainError):
    code, status, title = "not_found", 404, "Not found"


class Conflict(DomainError):
    code, status, title = "conflict", 409, "Conflict"


class InvalidState(DomainError):
    """An action in the wrong state: 409, lists `allowed_states`."""

    code, status, title = "invalid_state", 409, "Action not allowed in the current state"


class PreconditionFailed(DomainError):
    code, status, title = "precondition_failed", 412, "Precondition failed"


class QuotaExceeded(DomainError):
    code, status, title = "quota_exceeded", 422, "Quota exceeded"


class ServiceUnavailable(DomainError):
    code, status, title = "service_unavailable", 503, "Service unavailable"


#: The stable codes `field_error` gave serializer validators (a DRF error's own codes, "invalid", "required" ...,
#: are never a problem's code).
_FIELD_CODES: set[str] = set()


def field_error(message: str, *, code: str) -> drf_exc.ValidationError:
    """A serializer field validator's error with a stable problem `code` (raise it from ``validate_<field>``): a
    request whose every field error carries `code` answers 400 with that `code`, one with other errors beside it
    `validation_error`; either way every field is named in `errors`."""
    _FIELD_CODES.add(code)
    return drf_exc.ValidationError(message, code=code)


def fields_invalid(problems) -> ValidationFailed:
    """One 400 for several field problems a service found, ``[(field, message, code), ...]`` (in the order
    found): `errors` names each field with its messages; `code` is their code when they share one, else
    `validation_error`; `detail` is the messages, joined."""
    errors: dict[str, list[str]] = {}
    for field, message, _ in problems:
        errors.setdefault(field, []).append(message)
    codes = {code for _, _, code in problems}
    return ValidationFailed(" ".join(message for _, message, _ in problems),
                            code=codes.pop() if len(codes) == 1 else None, errors=errors)


def _leaves(detail) -> list:
    if isinstance(detail, dict):
        return [leaf for value in detail.values() for leaf in _leaves(value)]
    if isinstance(detail, list | tuple):
        return [leaf for value in detail for leaf in _leaves(value)]
    return [detail]


def _validation_code_and_detail(exc: drf_exc.ValidationError, errors: dict) -> tuple[str, str]:
    leaves = _leaves(exc.detail)
    codes = {getattr(leaf, "code", None) for leaf in leaves}
    if len(codes) == 1 and (code := codes.pop()) in _FIELD_CODES:
        return code, " ".join(str(leaf) for leaf in leaves)
    return "validation_error", "Invalid input: " + ", ".join(sorted(errors)) + "."


_DRF_CODES = {
    drf_exc.NotAuthenticated: ("not_authenticated", "Authentication required"),
    drf_exc.AuthenticationFailed: ("authentication_failed", "Authentication failed"),
    drf_exc.PermissionDenied: ("permission_denied", "Permission denied"),
    drf_exc.NotFound: ("not_found", "Not found"),
    drf_exc.MethodNotAllowed: ("method_not_allowed", "Method not allowed"),
    drf_exc.NotAcceptable: ("not_acceptable", "Not acceptable"),
    drf_exc.UnsupportedMediaType: ("unsupported_media_type", "Unsupported media type"),
    drf_exc.Throttled: ("throttled", "Too many requests"),
    drf_exc.ParseError: ("parse_error", "Malformed request"),
    drf_exc.ValidationError: ("validation_error", "Invalid input"),
}


def problem_body(*, status: int, code: str, title: str, detail: str, instance: str = "",
                 errors: dict | None = None, extra: dict | None = None) -> dict:
    body: dict[str, Any] = {
        "type": TYPE_BASE + code,
        "title": title,
        "status": status,
        "detail": detail,
        "instance": instance,
        "code": code,
        "request_id": get_request_id(),
    }
    if errors:
        body["errors"] = errors
    if extra:
        body.update({k: v for k, v in extra.items() if k not in body})
    return body


def problem_response(request, *, status: int, code: str, title: str, detail: str,
                     errors: dict | None = None, extra: dict | None = None) -> JsonResponse:
    """A Django `JsonResponse` carrying a problem document (for views outside DRF and middleware)."""
    body = problem_body(status=status, code=code, title=title, detail=detail,
                        instance=getattr(request, "path", ""), errors=errors, extra=extra)
    return JsonResponse(body, status=status, content_type=PROBLEM_CONTENT_TYPE)


def _flatten_errors(data: Any) -> dict:
    if isinstance(data, dict):
        return {k: (v if isinstance(v, list) else [v]) for k, v in data.items()}
    if isinstance(data, list):
        return {"non_field_errors": data}
    return {"non_field_errors": [data]}


def _detail_text(detail: Any) -> str:
    if isinstance(detail, list | tuple) and detail:
        return str(detail[0])
    if isinstance(detail, dict):
        return "Invalid input."
    return str(detail)


def problem_exception_handler(exc, context):
    """DRF `EXCEPTION_HANDLER`: every exception becomes problem+json; unknown ones are a logged 500. A 403 to a
    signed-in caller's change is announced on `request_refused`."""
    response = _problem_response(exc, context)
    request = context.get("request")
    # the user authentication already found (never `request.user`: that authenticates again, and may raise again)
    actor = getattr(request, "_user", None) if request is not None else None
    if (getattr(actor, "is_authenticated", False) and response.status_code == 403 and request.method not in SAFE_METHODS
            and not getattr(exc, "audited", False) and not _is_dry_run(context.get("view"))):
        try:
            request_refused.send(sender=problem_exception_handler, request=request, actor=actor,
                                 code=response.data.get("code"),
                                 detail=response.data.get("detail", ""),
                                 organization_id=getattr(exc, "organization_id", None))
        except Exception:  # recording the refusal must never change the answer
            log.exception("request_refused_receiver_failed", extra={"path": request.path,
                                                                    "request_id": get_request_id()})
    return response


def _is_dry_run(view) -> bool:
    return bool(getattr(getattr(view, getattr(view, "action", None) or "", None), "dry_run", False))


def _problem_response(exc, context):
    request = context.get("request")
    path = getattr(request, "path", "") if request is not None else ""
    if isinstance(exc, DatabaseError):  # contention or a unique violation no service mapped (apps.core.db)
        from .db import problem_for_database_error

        mapped = problem_for_database_error(exc)
        if mapped is not None:
            log.warning("database_error_mapped", extra={"path": path, "code": mapped.code,
                                                        "request_id": get_request_id()})
            exc = mapped
    if isinstance(exc, DomainError):
        body = problem_body(status=exc.status, code=exc.code, title=exc.title, detail=exc.detail,
                            instance=path, errors=exc.errors, extra=exc.extra)
        headers = {"Retry-After": str(exc.extra["retry_after"])} if "retry_after" in exc.extra else {}
        return Response(body, status=exc.status, headers=headers, content_type=PROBLEM_CONTENT_TYPE)
    if isinstance(exc, RequestDataTooBig):
        body = problem_body(status=413, code="payload_too_large", title="Payload too large",
                            detail="The request body is larger than the server accepts.", instance=path)
        return Response(body, status=413, content_type=PROBLEM_CONTENT_TYPE)
    if isinstance(exc, Http404):
        exc = drf_exc.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = drf_exc.PermissionDenied()
    elif isinstance(exc, DjangoValidationError):
        exc = drf_exc.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    if isinstance(exc, drf_exc.APIException):
        code, title = next(((c, t) for cls, (c, t) in _DRF_CODES.items() if isinstance(exc, cls)),
                           (getattr(exc, "default_code", "error"), "Error"))
        errors = None
        if isinstance(exc, drf_exc.ValidationError):
            errors = _flatten_errors(exc.detail)
            code, detail = _validation_code_and_detail(exc, errors)
        else:
            detail = _detail_text(exc.detail)
        body = problem_body(status=exc.status_code, code=code, title=title, detail=detail,
                            instance=path, errors=errors)
        headers = {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(int(exc.wait))
        return Response(body, status=exc.status_code, headers=headers, content_type=PROBLEM_CONTENT_TYPE)
    log.exception("unhandled_exception", extra={"path": path, "request_id": get_request_id()})
    body = problem_body(status=500, code="internal_error", title="Internal server error",
                        detail="An unexpected error occurred. Quote the request_id to support.", instance=path)
    return Response(body, status=500, content_type=PROBLEM_CONTENT_TYPE)
