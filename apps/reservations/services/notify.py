"""Audited events and the notification outbox.

`event_record` writes the audit event and, in the same transaction, one outbox row per active webhook endpoint
of the organization subscribed to the event, plus one e-mail row to the organization's billing e-mail (when
set) for tenant-facing events. `notifications_dispatch` (Celery beat, and after each commit that wrote rows)
enqueues one delivery task per due row on the `notifications` queue (its own workers, so a tenant's slow receiver
never holds a provisioning worker); `notification_deliver` sends one row: webhooks as a signed JSON POST (to the address checked at that moment, `apps.core.outbound`;
a refused destination fails the row at once; connect and read timeouts are a few seconds), e-mail through
Django's mail backend; a failure is retried with exponential backoff (30 s, 60 s, 120 s, ... capped at one hour)
up to `RESERVATIONS_WEBHOOK_MAX_ATTEMPTS`, the retry enqueued with a Celery countdown (never a sleep in a task).

Signature (same scheme as Stripe's and Standard Webhooks' documented HMAC signing): header
``Gpucloud-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>``; receivers recompute it
and reject old timestamps. Header ``Gpucloud-Event`` carries the event name, ``Gpucloud-Delivery`` the row id.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import logging

from django.core.mail import send_mail
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction

from apps.audit.services import audit_record
from apps.core import clock
from apps.core.outbound import DestinationRefused, guarded_post
from apps.core.tasks import enqueue_on_commit

from .. import conf
from ..models import Notification, WebhookEndpoint
from ..states import Channel, DeliveryStatus

log = logging.getLogger("gpucloud.reservations")
MAX_BACKOFF_S = 3600


def event_record(*, actor, action: str, target, organization, project=None, before=None, after=None,
                 event: str = "", payload: dict | None = None):
    """Audit `action` on `target`; when `event` is given also queue its notifications (same transaction)."""
    audit = audit_record(actor=actor, action=action, target=target, organization=organization, project=project,
                         before=before, after=after)
    if event:
        _outbox(organization, event, payload or {}, audit.pk)
    return audit


def _outbox(organization, event: str, payload: dict, audit_id) -> None:
    now = clock.now()
    body = json.loads(json.dumps({"event": event, "occurred_at": now, "data": payload}, cls=DjangoJSONEncoder))
    rows = [Notification(organization=organization, channel=Channel.WEBHOOK, endpoint=ep, event=event,
                         payload=body, audit_event_id=audit_id, next_attempt_at=now)
            for ep in WebhookEndpoint.objects.filter(organization=organization, is_active=True)
            if not ep.events or event in ep.events]
    if organization.billing_email:
        rows.append(Notification(organization=organization, channel=Channel.EMAIL, recipient=organization.billing_email,
                                 event=event, payload=body, audit_event_id=audit_id, next_attempt_at=now))
    if rows:
        Notification.objects.bulk_create(rows)
        from ..tasks import notifications_deliver_task

        enqueue_on_commit(notifications_deliver_task, queue="notifications")


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """Hex HMAC-SHA256 of ``b"<timestamp>." + body`` under `secret`."""
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def _send(n: Notification) -> None:
    body = json.dumps(n.payload, sort_keys=True).encode()
    if n.channel == Channel.EMAIL:
        data = n.payload.get("data", {})
        send_mail(subject=f"[gpucloud] {n.event}: {data.get('name', '')}".strip(),
                  message=json.dumps(n.payload, indent=2, sort_keys=True), from_email=None,
                  recipient_list=[n.recipient])
        return
    ts = int(clock.now().timestamp())
    resp = guarded_post(n.endpoint.url, data=body, timeout=(conf.webhook_connect_timeout_s(), conf.webhook_timeout_s()),
                        headers={"Content-Type": "application/json", "Gpucloud-Event": n.event,
                                 "Gpucloud-Delivery": str(n.pk),
                                 "Gpucloud-Signature": f"t={ts},v1={sign(n.endpoint.secret, ts, body)}"})
    if not 200 <= resp.status_code < 300:
        raise RuntimeError(f"HTTP {resp.status_code}")


def _due():
    return Notification.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=clock.now())


def notifications_dispatch(*, limit: int = 500) -> int:
    """Enqueue one `notification_deliver_task` (queue `notifications`) per due outbox row, oldest first; no
    HTTP here, so the sweep never waits on a receiver. Returns how many were enqueued."""
    from ..tasks import notification_deliver_task

    pks = list(_due().order_by("next_attempt_at").values_list("pk", flat=True)[:limit])
    for pk in pks:
        enqueue_on_commit(notification_deliver_task, str(pk), queue="notifications")
    return len(pks)


def notifications_deliver(*, limit: int = 100) -> int:
    """Send due outbox rows in this process, one after the other (`notification_deliver` each). Returns how many
    were delivered."""
    pks = list(_due().order_by("next_attempt_at").values_list("pk", flat=True)[:limit])
    return sum(notification_deliver(pk) == DeliveryStatus.DELIVERED for pk in pks)


def notification_deliver(notification_id) -> str:
    """Send one outbox row if it is due (under its row lock, SKIP LOCKED; a row another worker holds, or that is
    not due, is left alone). One POST with `RESERVATIONS_WEBHOOK_CONNECT_TIMEOUT_S` / `RESERVATIONS_WEBHOOK_TIMEOUT_S`
    timeouts and no waiting in between: a failure sets `next_attempt_at` to the backoff and enqueues this row's
    retry with that Celery countdown (after commit). Returns the row's status afterwards ('' when skipped)."""
    from ..tasks import notification_deliver_task

    with transaction.atomic():
        n = (_due().select_for_update(skip_locked=True, of=("self",)).select_related("endpoint")
             .filter(pk=notification_id).first())
        if n is None:
            return ""
        n.attempts += 1
        try:
            _send(n)
        except DestinationRefused as exc:  # the address is checked again at delivery (DNS rebinding)
            n.last_error, n.status = f"refused: {exc.detail}"[:1000], DeliveryStatus.FAILED
            log.warning("notification_refused", extra={"notification": str(n.pk), "error": n.last_error})
        except Exception as exc:  # noqa: BLE001 - any failure of the receiver is retried
            n.last_error = str(exc)[:1000]
            backoff = min(MAX_BACKOFF_S, 30 * 2 ** (n.attempts - 1))
            if n.attempts >= conf.webhook_max_attempts():
                n.status = DeliveryStatus.FAILED
            else:
                enqueue_on_commit(notification_deliver_task, str(n.pk), queue="notifications", countdown=backoff)
            n.next_attempt_at = clock.now() + dt.timedelta(seconds=backoff)
            log.warning("notification_failed", extra={"notification": str(n.pk), "error": n.last_error})
        else:
            n.status, n.delivered_at, n.last_error = DeliveryStatus.DELIVERED, clock.now(), ""
        n.save(update_fields=["attempts", "status", "next_attempt_at", "last_error", "delivered_at", "updated_at"])
        return n.status
