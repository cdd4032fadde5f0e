"""Django-level 404/500 handlers (routes DRF never sees) answer in problem+json too."""
from .errors import problem_response


def not_found(request, exception=None):
    return problem_response(request, status=404, code="not_found", title="Not found",
                            detail=f"No route matches {request.path}.")


def server_error(request):
    return problem_response(request, status=500, code="internal_error", title="Internal server error",
                            detail="An unexpected error occurred. Quote the request_id to support.")
