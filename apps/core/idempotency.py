"""`Idempotency-Key` on creates: one layer for every app (after the IETF httpapi idempotency-key draft).

A client that may retry a create sends `Idempotency-Key: <1-255 printable ASCII characters>`:

- The key is scoped to the credential and the endpoint (method + path): an API token's key is that token's
  (`token:<id>`; two tokens of one user never share keys, whatever their bindings and scopes), a console
  session's is its user's. It is remembered `IDEMPOTENCY_KEY_TTL_HOURS` (24 h), after which it is new.
- A replay is only answered to a caller who could make the request now: the view's permission checks run again
  and, where the view has a `get_queryset`, the created object (the body's `id`, or the `id` of its first
  object member, e.g. `instance` of a 202) must be visible to the caller; otherwise the stored answer is
  dropped and the request runs as if it were new (so it gets the errors anyone else would get).
- First use: the request runs in one transaction that also stores its answer (status, body, `Location`), so
  the key is recorded exactly when what the request created is committed.
- Same key, same body: the stored answer is returned (same object, same operation; header
  `Idempotent-Replayed: true`); nothing new is created.
- Same key, different body: 422 `idempotency_key_reused`; nothing runs.
- Concurrent requests with one key: the second waits on the first's row (the unique index) and then replays
  its answer; if the first failed, the second runs. One create either way.
- A request that fails (4xx/5xx) stores nothing: a corrected retry with the same key runs normally.
- The layer owns the transaction, so it is also the one that retries it on a deadlock or serialization failure
  (`apps.core.db.atomic_with_retry`); the idempotency key is the first lock taken (the lock order there).
- A malformed key is 400 `invalid_idempotency_key`.
- Expired keys are deleted by `idempotency_keys_purge` (Celery beat `core-idempotency-keys-purge`, every
  `IDEMPOTENCY_KEY_PURGE_INTERVAL_SECONDS`, 3600 s), in batches; until then an expired key already counts as new.

Use `@idempotent_create` on a viewset's create method (it also declares the header in the OpenAPI schema), or
call `idempotent(request, execute)` around any other POST.
"""
from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import re
from collections.abc import Callable

from django.conf import settings
from django.db import IntegrityError, transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.utils.encoders import JSONEncoder

from .clock import now
from .db import atomic_with_retry
from .errors import DomainError, ValidationFailed
from .models import IdempotencyKey

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
KEPT_HEADERS = ("Location",)
_VALID_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")

IDEMPOTENCY_KEY_PARAMETER = OpenApiParameter(
    HEADER, OpenApiTypes.STR, OpenApiParameter.HEADER, required=False,
    description="1-255 printable ASCII characters. A retry with the same key and body returns the first answer "
                "(header `Idempotent-Replayed: true`) and creates nothing; the same key with a different body is "
                "422 `idempotency_key_reused`. Scoped to the credential (this API token, or the console "
                "session's user) and this endpoint, kept 24 hours; replayed only to a caller who may make the "
                "request and see what it created.")


class IdempotencyKeyReused(DomainError):
    """422: the key was already used for a different request body at this endpoint."""

    code, status, title = "idempotency_key_reused", 422, "Idempotency key reused"


def ttl() -> dt.timedelta:
    return dt.timedelta(hours=getattr(settings, "IDEMPOTENCY_KEY_TTL_HOURS", 24))


def idempotency_keys_purge(*, batch_size: int = 5000) -> int:
    """Delete every key older than `ttl()` (by `created_at`); returns how many were deleted.

    Idempotent (a second run deletes nothing) and safe beside live requests: a key still within its TTL is never
    touched, and each batch is its own short transaction (`batch_size` rows), so the index lock a concurrent
    create of the same key waits on is held briefly."""
    cutoff = now() - ttl()
    deleted = 0
    while True:
        with transaction.atomic():
            ids = list(IdempotencyKey.objects.filter(created_at__lt=cutoff).order_by("created_at")
                       .values_list("pk", flat=True)[:batch_size])
            if not ids:
                return deleted
            deleted += IdempotencyKey.objects.filter(pk__in=ids, created_at__lt=cutoff).delete()[0]


def idempotent(request, execute: Callable[[], Response], *, unstored: tuple[str, ...] = (),
               may_replay: Callable[[object], bool] | None = None) -> Response:
    """Run `execute()` at most once per Idempotency-Key (see the module docstring); without the header, run it.

    `unstored`: top-level body members never written to the database (a secret shown once, such as a new API
    token); a replay answers them as null. `may_replay(stored_body)`: False when the caller may not be answered
    the stored answer now (then it is dropped and `execute()` runs as for a new key)."""
    key = request.headers.get(HEADER)
    if key is None:
        return execute()
    key = key.strip()
    if not _VALID_KEY.match(key):
        raise ValidationFailed("Idempotency-Key must be 1-255 printable ASCII characters.",
                               code="invalid_idempotency_key", errors={HEADER: ["1-255 printable ASCII characters"]})
    endpoint = f"{request.method} {request.path.rstrip('/')}"
    return _run_once(_caller(request), endpoint, key, _body_hash(request.data), execute, unstored,
                     may_replay or (lambda body: True))


def _caller(request) -> str:
    """The credential a key belongs to: `token:<id>` for an API token, the user's id for a console session."""
    token_id = getattr(getattr(request, "auth", None), "pk", None)
    if token_id is not None:
        return f"token:{token_id}"
    return str(getattr(request.user, "pk", "") or "anonymous")


@atomic_with_retry
def _run_once(caller: str, endpoint: str, key: str, digest: str, execute, unstored, may_replay) -> Response:
    """Claim the key, run, store the answer: one transaction, which this layer owns (so a deadlock or
    serialization failure inside the create is retried here, from the claim on; `apps.core.db`)."""
    IdempotencyKey.objects.filter(caller=caller, endpoint=endpoint, key=key, created_at__lt=now() - ttl()).delete()
    try:
        with transaction.atomic():
            # Blocks while a concurrent request holds the same key; fails once that one committed.
            record = IdempotencyKey.objects.create(caller=caller, endpoint=endpoint, key=key, request_hash=digest,
                                                   response_status=0)
    except IntegrityError:
        stored = IdempotencyKey.objects.get(caller=caller, endpoint=endpoint, key=key)
        if stored.request_hash != digest or may_replay(stored.response_body):
            return _replay(stored, digest)
        stored.delete()  # the caller could not make this request now: it runs as new (and fails like one)
        record = IdempotencyKey.objects.create(caller=caller, endpoint=endpoint, key=key, request_hash=digest,
                                               response_status=0)
    response = execute()
    if 200 <= response.status_code < 300:
        body = _jsonable(response.data)
        if isinstance(body, dict):
            body.update({name: None for name in unstored if name in body})
        record.response_status, record.response_body = response.status_code, body
        record.response_headers = {h: response[h] for h in KEPT_HEADERS if response.has_header(h)}
        record.save(update_fields=["response_status", "response_body", "response_headers"])
    else:
        record.delete()
    return response


def idempotent_create(method=None, *, unstored: tuple[str, ...] = ()):
    """Decorate a viewset's `create(self, request, ...)` (or a POST action): `Idempotency-Key` handled by
    `idempotent`, and the header declared on the operation in the OpenAPI schema. Use as `@idempotent_create`
    or `@idempotent_create(unstored=("token",))`."""
    if method is None:
        return functools.partial(idempotent_create, unstored=unstored)

    @functools.wraps(method)
    def wrapper(self, request, *args, **kwargs):
        def may_replay(body) -> bool:
            try:
                self.check_permissions(request)
            except Exception:  # noqa: BLE001 - a refusal of any kind: run the request and let it refuse
                return False
            created = _created_id(body)
            if created is None or not hasattr(self, "get_queryset"):
                return True
            return self.get_queryset().filter(pk=created).exists()

        return idempotent(request, lambda: method(self, request, *args, **kwargs), unstored=unstored,
                          may_replay=may_replay)

    return extend_schema(parameters=[IDEMPOTENCY_KEY_PARAMETER])(wrapper)


def _replay(record: IdempotencyKey, digest: str) -> Response:
    if record.request_hash != digest:
        raise IdempotencyKeyReused(f"This {HEADER} was used with a different request body.")
    return Response(record.response_body, status=record.response_status,
                    headers={**record.response_headers, REPLAYED_HEADER: "true"})


def _created_id(body):
    """The id of what a stored answer created: its `id`, or the `id` of its first object member; None if none."""
    if not isinstance(body, dict):
        return None
    if body.get("id") is not None:
        return body["id"]
    member = next((v for v in body.values() if isinstance(v, dict) and v.get("id") is not None), None)
    return None if member is None else member["id"]


def _body_hash(data) -> str:
    if hasattr(data, "lists"):  # a form or multipart QueryDict
        data = {k: v for k, v in data.lists()}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def _jsonable(value):
    return json.loads(json.dumps(value, cls=JSONEncoder))
