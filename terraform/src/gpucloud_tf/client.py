"""The provider's HTTP client of gpucloud's public REST API (`<endpoint>/api/v1/`, bearer token).

Standard library only (urllib), so the provider's virtual environment holds `tf` and nothing else. Every answer is
an `ApiResponse` (status, JSON body, headers); connection failures raise `Unreachable`. Problem documents
(RFC 9457, `application/problem+json`) are turned into Terraform diagnostics by `problem_diagnostic`.
Nothing here writes to stdout: Terraform reads the provider's stdout as its plugin handshake.
"""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

USER_AGENT = "terraform-provider-gpucloud/0.1.0"


class Unreachable(Exception):
    """The endpoint did not answer (connection refused, DNS, timeout)."""


class NotAnApi(Unreachable):
    """The endpoint answered, but not as gpucloud's API does (HTML from a console or a proxy, a non-JSON body):
    the endpoint is wrong. A subclass of `Unreachable`, so every caller reports it before touching anything."""


@dataclass
class ApiResponse:
    status: int
    body: object
    headers: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def etag(self) -> str | None:
        return self.headers.get("etag")

    @property
    def replayed(self) -> bool:
        return self.headers.get("idempotent-replayed", "").lower() == "true"


class Client:
    """`Client(endpoint, token)`; `request(method, path, body=None, headers=None, params=None)`.

    `path` is relative to `/api/v1/` (`"vpcs"`, `"vpcs/<id>"`); a trailing slash is added. Connection errors
    are retried twice (0.5 s, 1 s) for reads only; a write is never repeated blindly (creates carry an
    Idempotency-Key and are repeated by the caller, which knows the key)."""

    def __init__(self, endpoint: str, token: str, *, timeout: float = 60.0):
        self.base = endpoint.rstrip("/") + "/api/v1/"
        self.endpoint = endpoint.rstrip("/")
        self.token = token
        self.timeout = timeout

    def url(self, path: str, params: dict | None = None) -> str:
        if path.startswith("http://") or path.startswith("https://"):
            return path
        url = self.base + path.strip("/") + "/"
        if params:
            url += "?" + urllib.parse.urlencode({k: v for k, v in params.items() if v is not None}, doseq=True)
        return url

    def request(self, method: str, path: str, body=None, *, headers: dict | None = None,
                params: dict | None = None) -> ApiResponse:
        url = self.url(path, params)
        data = None if body is None else json.dumps(body).encode()
        hdrs = {"Accept": "application/json", "User-Agent": USER_AGENT, **(headers or {})}
        if self.token:
            hdrs["Authorization"] = f"Bearer {self.token}"
        if data is not None:
            hdrs["Content-Type"] = "application/json"
        attempts = 3 if method == "GET" else 1
        for attempt in range(attempts):
            req = urllib.request.Request(url, data=data, headers=hdrs, method=method)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return self._checked(method, url, resp.status, resp.read(), resp.headers)
            except urllib.error.HTTPError as exc:
                return self._checked(method, url, exc.code, exc.read(), exc.headers)
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                if attempt + 1 < attempts:
                    time.sleep(0.5 * (attempt + 1))
                    continue
                reason = getattr(exc, "reason", exc)
                raise Unreachable(f"{method} {url}: {reason}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _checked(self, method: str, url: str, status: int, raw: bytes, headers) -> ApiResponse:
        """The answer, or `NotAnApi` when a non-5xx answer's body is not JSON (every gpucloud answer with a body
        is JSON or an `application/problem+json` document; a proxy's HTML 502 stays an HTTP error)."""
        ctype = (headers.get("Content-Type") if headers else "") or ""
        if raw and status < 500 and "json" not in ctype.lower():
            raise NotAnApi(f"{method} {url} answered HTTP {status} {ctype or 'without a Content-Type'}, not JSON: "
                           f"{self.endpoint} does not look like a gpucloud API: check endpoint (the provider's "
                           "`endpoint` or GPUCLOUD_ENDPOINT: the service's base URL, without /api/v1)")
        return _response(status, raw, headers)

    def list_all(self, path: str, params: dict | None = None) -> list[dict]:
        """Every item of a cursor-paginated collection (follows `next`)."""
        out: list[dict] = []
        url, query = path, {"page_size": 500, **(params or {})}
        while url:
            r = self.request("GET", url, params=query)
            if not r.ok:
                raise ApiError(r)
            if isinstance(r.body, list):
                return out + r.body
            out += r.body.get("results", [])
            url, query = r.body.get("next"), None
        return out


class ApiError(Exception):
    def __init__(self, response: ApiResponse):
        super().__init__(f"HTTP {response.status}")
        self.response = response


def _response(status: int, raw: bytes, headers) -> ApiResponse:
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = {"detail": raw[:500].decode(errors="replace")}
    return ApiResponse(status, body, {k.lower(): v for k, v in (headers or {}).items()})


def problem_summary(r: ApiResponse, what: str) -> tuple[str, str]:
    """(summary, detail) of a failed answer: the problem's `code`, `detail`, per-field `errors`, and for placement
    refusals the `explanation` and `earliest_start` (ADR 0404)."""
    body = r.body if isinstance(r.body, dict) else {}
    code = body.get("code") or f"http_{r.status}"
    detail = body.get("detail") or body.get("title") or ""
    if r.status == 401:
        summary = f"{what}: the API token was refused (HTTP 401 {code})"
        detail = (detail + "\n" if detail else "") + ("Check the provider's `token` (or GPUCLOUD_TOKEN): it must be a "
                                                      "valid, unrevoked gpucloud API token.")
        return summary, detail
    summary = f"{what}: HTTP {r.status} {code}" + (f": {detail}" if detail else "")
    parts = []
    errors = body.get("errors")
    if isinstance(errors, dict):
        for k, v in errors.items():
            parts.append(f"{k}: {'; '.join(map(str, v)) if isinstance(v, list) else v}")
    if body.get("reason"):
        parts.append(f"reason: {body['reason']}")
    if body.get("explanation"):
        parts.append("explanation: " + explain(body["explanation"]))
    if "earliest_start" in body:
        parts.append(f"earliest_start: {body.get('earliest_start') or 'none within the search horizon'}")
    elif code == "unplaceable":
        parts.append("earliest_start: never (no host of this fleet can hold it, even when empty)")
    if body.get("request_id"):
        parts.append(f"request_id: {body['request_id']}")
    return summary, "\n".join(parts)


def explain(explanation) -> str:
    """A placement explanation (per-filter host counts) in one readable line."""
    if not isinstance(explanation, dict):
        return json.dumps(explanation)
    bits = []
    if "hosts_considered" in explanation:
        bits.append(f"{explanation['hosts_considered']} hosts considered")
    for f in explanation.get("filters", []) or []:
        if not isinstance(f, dict):
            continue
        removed = f.get("removed", f.get("count"))
        reasons = f.get("reasons") or {}
        r = ", ".join(f"{k}={v}" for k, v in reasons.items()) if isinstance(reasons, dict) else str(reasons)
        bits.append(f"{f.get('filter')}: removed {removed}" + (f" ({r})" if r else ""))
    rest = {k: v for k, v in explanation.items() if k not in ("filters", "hosts_considered")}
    if rest:
        bits.append(json.dumps(rest, sort_keys=True, default=str))
    return "; ".join(bits) if bits else json.dumps(explanation)
