"""A client's `X-Request-ID` reaches logs and audit events only when it is 1-128 characters of [A-Za-z0-9._-];
anything else (a trailing newline, other characters, too long) is replaced by a generated id, the same one the
response echoes and the audit event keeps."""
import pytest

from apps.audit.models import AuditEvent
from tests.tenancy.helpers import client_for, make_org, make_user, member, token_for


@pytest.fixture
def client(db):
    user = make_user("dev@acme.test")
    org = make_org("acme")
    member(user, org, "member")
    return client_for(token_for(user, organization=org))


@pytest.mark.parametrize("sent", ["evil\n", "evil\r\nX-Injected: 1", "a b", "x" * 129, "ünïcode", "id;drop", ""])
def test_an_unsafe_request_id_is_replaced_everywhere(client, sent):
    r = client.patch("/api/v1/me", {"full_name": "Dev"}, format="json", HTTP_X_REQUEST_ID=sent)
    assert r.status_code == 200
    echoed = r["X-Request-ID"]
    assert echoed != sent and len(echoed) == 36  # a UUIDv7
    event = AuditEvent.objects.get(action="user.update")
    assert event.request_id == echoed


def test_a_safe_request_id_is_kept(client):
    sent = "req-2026.12_02-" + "a" * 113  # 128 characters
    r = client.patch("/api/v1/me", {"full_name": "Dev"}, format="json", HTTP_X_REQUEST_ID=sent)
    assert r["X-Request-ID"] == sent
    assert AuditEvent.objects.get(action="user.update").request_id == sent
