"""`Idempotency-Key` for billing POSTs (RW-057; Stripe's "Idempotent requests" model).

- The key is scoped to (user, endpoint) and remembered BILLING_IDEMPOTENCY_TTL_HOURS (24 h); after that it is new.
- The first request claims the key in its own committed transaction, then executes; its status and body are saved
  and every retry with the same body gets them back (header `Idempotent-Replayed: true`).
- Same key, different body: 422 `idempotency_key_reused`, nothing executed.
- Same key while the first is still executing: 409 `idempotency_request_in_flight`.
- A request that fails (4xx/5xx) is not stored, so a corrected retry with the same key is processed normally.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable

from django.db import IntegrityError, transaction
from rest_framework.response import Response

from apps.core.clock import now
from apps.core.errors import Conflict, DomainError

from . import conf
from .errors import Code
from .models import IdempotencyRecord


class IdempotencyKeyReused(DomainError):
    code, status, title = Code.IDEMPOTENCY_KEY_REUSED, 422, "Idempotency key reused"


def _claim(user, endpoint: str, key: str, digest: str) -> tuple[IdempotencyRecord, bool]:
    with transaction.atomic():
        cutoff = now() - dt.timedelta(hours=conf.get("BILLING_IDEMPOTENCY_TTL_HOURS"))
        IdempotencyRecord.objects.filter(user=user, endpoint=endpoint, key=key, created_at__lt=cutoff).delete()
        try:
            with transaction.atomic():
                return IdempotencyRecord.objects.create(user=user, endpoint=endpoint, key=key,
                                                        request_hash=digest), True
        except IntegrityError:
            return IdempotencyRecord.objects.get(user=user, endpoint=endpoint, key=key), False


def idempotent(request, endpoint: str, execute: Callable[[], Response]) -> Response:
    """Run `execute` at most once per Idempotency-Key (see the module docstring); without the header, run it."""
    key = request.headers.get("Idempotency-Key", "").strip()
    if not key:
        return execute()
    digest = hashlib.sha256(json.dumps(request.data, sort_keys=True, default=str).encode()).hexdigest()
    record, created = _claim(request.user, endpoint, key[:255], digest)
    if not created:
        if record.request_hash != digest:
            raise IdempotencyKeyReused("This Idempotency-Key was used with a different request body.")
        if record.response_status is None:
            raise Conflict("A request with this Idempotency-Key is still in progress.",
                           code=Code.IDEMPOTENCY_REQUEST_IN_FLIGHT)
        return Response(record.response_body, status=record.response_status,
                        headers={"Idempotent-Replayed": "true"})
    try:
        response = execute()
    except BaseException:
        IdempotencyRecord.objects.filter(pk=record.pk).delete()
        raise
    IdempotencyRecord.objects.filter(pk=record.pk).update(response_status=response.status_code,
                                                          response_body=json.loads(json.dumps(response.data,
                                                                                              default=str)))
    return response
