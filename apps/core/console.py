"""The customer console (the SPA built from `frontend/` into `CONSOLE_DIST_DIR`), served by the product itself on
the API's origin, so the console signs in with the session cookie and sends the CSRF token (docs/console.md).

* `/assets/<name>`: the bundler's content-hashed files, `Cache-Control: public, max-age=31536000, immutable`.
* another file of the build (`/favicon.svg`): served with a one-hour cache.
* any other GET/HEAD path without a file extension (a client route such as `/instances/<id>`): `index.html` with
  `Cache-Control: no-cache`, so a new build is picked up on the next load.
* a path with an extension that is not in the build: the usual 404 problem. Other methods: 405 problem.
* no build (`index.html` missing): 503 problem `console_not_built` (run `make console`); the API is unaffected.

The catch-all route (`ROUTE`) never matches the product's own prefixes (`/api/`, `/admin`, `/healthz`, `/readyz`,
`/metrics`, `/oidc/`, `/static/` and the server-rendered pages), so their unknown paths stay 404 problems and
APPEND_SLASH still applies to them.
"""
import mimetypes
from pathlib import Path

from django.conf import settings
from django.core.exceptions import SuspiciousFileOperation
from django.http import FileResponse
from django.utils._os import safe_join
from django.views.decorators.http import require_safe

from .errors import problem_response
from .handlers import not_found

ASSET_CACHE = "public, max-age=31536000, immutable"
FILE_CACHE = "public, max-age=3600"
RESERVED_PREFIXES = ("api/", "api$", "admin", "healthz", "readyz", "metrics", "oidc/", "static/", "invitations/",
                     "signup/", "sign-in/")
ROUTE = r"^(?!" + "|".join(RESERVED_PREFIXES) + r")(?P<path>.*)$"


def _dist() -> Path:
    return Path(settings.CONSOLE_DIST_DIR)


def _file(path: str) -> Path | None:
    try:
        candidate = Path(safe_join(_dist(), path))
    except SuspiciousFileOperation:  # a path outside the build
        return None
    return candidate if candidate.is_file() else None


def _send(file: Path, cache_control: str) -> FileResponse:
    content_type, _ = mimetypes.guess_type(file.name)
    response = FileResponse(file.open("rb"), content_type=content_type or "application/octet-stream")
    response["Cache-Control"] = cache_control
    response["X-Content-Type-Options"] = "nosniff"
    return response


@require_safe
def console(request, path: str = ""):
    """One of the console's files, or its `index.html` for a client route (see the module docstring)."""
    if path:
        file = _file(path)
        if file is not None:
            return _send(file, ASSET_CACHE if path.startswith("assets/") else FILE_CACHE)
        if "." in path.rsplit("/", 1)[-1]:
            return not_found(request)
    index = _dist() / "index.html"
    if not index.is_file():
        return problem_response(request, status=503, code="console_not_built", title="Console not built",
                                detail="The web console is not built on this server: run `make console`. "
                                       "The API answers at /api/v1/.")
    response = _send(index, "no-cache")
    response["Content-Type"] = "text/html; charset=utf-8"
    return response
