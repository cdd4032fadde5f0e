"""Django-level 400/403/404/500 handlers (what DRF never sees: a Host header outside ALLOWED_HOSTS, a CSRF refusal of a
plain Django view, an unknown route) answer in problem+json too."""
from django.core.exceptions import DisallowedHost

from .errors import problem_response


def bad_request(request, exception=None):
    """400 for what Django refuses before any view runs: `disallowed_host` for a Host header this deployment does
    not serve (ALLOWED_HOSTS), `bad_request` for any other suspicious request."""
    if isinstance(exception, DisallowedHost):
        return problem_response(request, status=400, code="disallowed_host", title="Bad request",
                                detail="The Host header names a host this deployment does not serve.")
    return problem_response(request, status=400, code="bad_request", title="Bad request",
                            detail="The request was refused before it reached the API.")


def permission_denied(request, exception=None):
    return problem_response(request, status=403, code="permission_denied", title="Forbidden",
                            detail="You do not have permission to perform this action.")


def not_found(request, exception=None):
    return problem_response(request, status=404, code="not_found", title="Not found",
                            detail=f"No route matches {request.path}.")


def server_error(request):
    return problem_response(request, status=500, code="internal_error", title="Internal server error",
                            detail="An unexpected error occurred. Quote the request_id to support.")
