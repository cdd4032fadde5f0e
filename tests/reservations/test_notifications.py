"""Webhooks (signed, retried with backoff from the outbox written with the audit event) and e-mail."""
import datetime as dt
import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.core import mail

from apps.audit.models import AuditEvent
from apps.reservations.models import Notification, WebhookEndpoint
from apps.reservations.services.notify import notifications_deliver
from apps.tenancy.models import OrgRole
from tests.tenancy.helpers import client_for, make_user, member, token_for

from .conftest import at, gpu_host, lease

pytestmark = pytest.mark.django_db


class _Receiver(BaseHTTPRequestHandler):
    status = 204
    received: list = []

    def do_POST(self):  # noqa: N802 - http.server API
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((dict(self.headers), body))
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]  # the operator's allow-list opens this test receiver
    _Receiver.received = []
    _Receiver.status = 204
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook", _Receiver
    server.shutdown()


def test_webhook_signed_and_retried_with_backoff(world, clock, receiver, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    url, rx = receiver
    world.org_a.billing_email = "ops@a.example"
    world.org_a.save()
    # the organization's admin adds it (provider staff act inside a customer's organization only as a member)
    admin = make_user("admin@a.example")
    member(admin, world.org_a, OrgRole.ADMIN)
    admin_client = client_for(token_for(admin, organization=world.org_a))
    r = admin_client.post("/api/v1/webhooks", {"organization": str(world.org_a.pk), "url": url,
                                               "events": ["lease.confirmed"]}, format="json")
    assert r.status_code == 201, r.content
    secret = r.json()["secret"]
    assert "secret" not in world.client_a.get("/api/v1/webhooks").json()["results"][0]
    gpu_host()
    rx.status = 500
    le = lease(world.project_a, start=at(9), end=at(12))
    hook = Notification.objects.get(channel="webhook")
    audit = AuditEvent.objects.get(action="reservations.lease.confirm", target_id=str(le.pk))
    assert hook.audit_event_id == audit.pk and hook.event == "lease.confirmed"
    assert notifications_deliver() == 1  # the e-mail; the webhook failed
    hook.refresh_from_db()
    assert (hook.status, hook.attempts, hook.next_attempt_at) == ("pending", 1, at(8) + dt.timedelta(seconds=30))
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["ops@a.example"]
    assert notifications_deliver() == 0  # not due yet
    clock.move_to(at(8, 0) + dt.timedelta(seconds=30))
    assert notifications_deliver() == 0
    hook.refresh_from_db()
    assert hook.next_attempt_at == at(8) + dt.timedelta(seconds=30 + 60)
    rx.status = 204
    clock.move_to(at(8, 2))
    assert notifications_deliver() == 1
    hook.refresh_from_db()
    assert (hook.status, hook.attempts) == ("delivered", 3)
    headers, body = rx.received[-1]
    t, v1 = (part.split("=", 1)[1] for part in headers["Gpucloud-Signature"].split(","))
    assert hmac.compare_digest(v1, hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest())
    assert json.loads(body)["data"]["id"] == str(le.pk) and headers["Gpucloud-Event"] == "lease.confirmed"


def test_webhook_gives_up_after_the_limit(world, clock, receiver, settings):
    settings.RESERVATIONS_WEBHOOK_MAX_ATTEMPTS = 2
    url, rx = receiver
    rx.status = 503
    WebhookEndpoint.objects.create(organization=world.org_a, url=url, secret="s")
    gpu_host()
    lease(world.project_a, start=at(9), end=at(12))
    notifications_deliver()
    clock.move_to(at(8, 5))
    notifications_deliver()
    assert Notification.objects.get().status == "failed"


def test_other_org_cannot_add_a_webhook(world):
    import uuid

    # ADR 0010: another tenant's organization in the body answers exactly like a random id, 400 naming the member.
    answers = []
    for org in (str(world.org_a.pk), str(uuid.uuid4())):
        r = world.client_b.post("/api/v1/webhooks", {"organization": org, "url": "https://x.test/h"}, format="json")
        body = r.json()
        answers.append((r.status_code, body["code"], body["errors"], body["detail"]))
    assert answers[0] == answers[1] == (400, "validation_error", {"organization": ["Not found."]},
                                        "Invalid input: organization.")
    assert not WebhookEndpoint.objects.exists()
    r = world.client_a.post("/api/v1/webhooks", {"organization": str(world.org_a.pk), "url": "https://x.test/h"},
                            format="json")
    assert r.status_code == 403  # a member, not an owner/admin
    assert not WebhookEndpoint.objects.exists()


def test_a_receiver_that_never_answers_gets_a_countdown_retry_not_a_blocked_worker(world, clock, settings,
                                                                                  monkeypatch,
                                                                                  django_capture_on_commit_callbacks):
    """A receiver that accepts the connection and never answers: the delivery task gives up after the read
    timeout, records the failure and enqueues its own retry with the backoff as a Celery countdown, on the
    `notifications` queue; nothing sleeps in the task."""
    import socket
    import time

    from apps.reservations.tasks import notification_deliver_task

    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.RESERVATIONS_WEBHOOK_TIMEOUT_S = 0.2
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel completes the handshake; nobody ever reads or answers
    ep = WebhookEndpoint.objects.create(organization=world.org_a, url=f"http://127.0.0.1:{silent.getsockname()[1]}/",
                                        secret="s")
    gpu_host()
    lease(world.project_a, start=at(9), end=at(12))
    hook = Notification.objects.get(endpoint=ep)
    sent = []
    monkeypatch.setattr(notification_deliver_task, "apply_async",
                        lambda args, kwargs, **opts: sent.append((args, opts)))
    monkeypatch.setattr(time, "sleep", lambda s: pytest.fail(f"slept {s} s in a delivery task"))
    try:
        with django_capture_on_commit_callbacks(execute=True):
            assert notification_deliver_task.apply(args=[str(hook.pk)]).get() == "pending"
    finally:
        silent.close()
    hook.refresh_from_db()
    assert hook.attempts == 1 and "timed out" in hook.last_error.lower(), hook.last_error
    assert hook.next_attempt_at == at(8) + dt.timedelta(seconds=30)
    assert sent == [((str(hook.pk),), {"queue": "notifications", "countdown": 30})]
    from gpucloud.celery import app

    assert app.amqp.router.route({}, notification_deliver_task.name)["queue"].name == "notifications"
