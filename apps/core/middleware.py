"""Request id, metrics and problem+json for errors raised outside DRF views."""
import logging
import re
import time

import structlog

from .errors import problem_response
from .ids import uuid7
from .metrics import HTTP_LATENCY, HTTP_REQUESTS

log = logging.getLogger("gpucloud.request")
# 1-128 of [A-Za-z0-9._-], the whole value (fullmatch: `$` would let a trailing newline through, which then breaks
# the echoed header and lands in logs and audit events).
_VALID_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")


class RequestIdMiddleware:
    """Takes the client's `X-Request-ID` when it is 1-128 characters of `[A-Za-z0-9._-]` (nothing else, no trailing
    newline), else makes a UUIDv7; binds it to every log line and audit event and echoes it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        incoming = request.headers.get("X-Request-ID", "")
        request_id = incoming if _VALID_REQUEST_ID.fullmatch(incoming) else str(uuid7())
        request.request_id = request_id
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=request_id,
                                               source_ip=request.META.get("REMOTE_ADDR", ""))
        try:
            response = self.get_response(request)
        finally:
            structlog.contextvars.clear_contextvars()
        response["X-Request-ID"] = request_id
        return response


class MetricsMiddleware:
    """Counts requests and observes latency per route template (never per raw path, to bound cardinality)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        route = ("/" + match.route) if match is not None and match.route else "unmatched"
        HTTP_REQUESTS.labels(request.method, route, str(response.status_code)).inc()
        HTTP_LATENCY.labels(request.method, route).observe(time.perf_counter() - started)
        return response


class ProblemJsonMiddleware:
    """Unhandled exceptions in non-DRF views become a 500 problem+json; the traceback goes to the log only."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        log.exception("unhandled_exception", extra={"path": request.path,
                                                    "request_id": getattr(request, "request_id", "")})
        return problem_response(request, status=500, code="internal_error", title="Internal server error",
                                detail="An unexpected error occurred. Quote the request_id to support.")
