"""The audit table refuses TRUNCATE as it refuses UPDATE and DELETE, and every event is linked into a hash chain
when its transaction commits, so a change made around the triggers (by the table's owner) is found by
`audit_verify` / `GET /audit-events/verify`; `GET /audit-events/export` ships the chain as JSON Lines (ADR 0111)."""
import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from apps.audit.models import AuditChainLink, AuditEvent
from apps.audit.selectors import GENESIS_HASH, audit_chain_verify
from apps.tenancy.models import OrgRole
from tests.tenancy.helpers import client_for, make_org, make_user, member, org_owner_client, token_for


def _sql(statement: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement)


def _link_now() -> None:
    """Inside a test's transaction (which never commits) link each event at insert time instead of at commit."""
    _sql("SET CONSTRAINTS audit_event_chain IMMEDIATE")


def _around_trigger(table: str, trigger: str, statement: str) -> None:
    """Tamper as the table's owner would: lift the refusal, change a row, restore it."""
    _sql("SET CONSTRAINTS ALL IMMEDIATE")  # ALTER TABLE waits for no pending trigger event
    _sql(f"ALTER TABLE {table} DISABLE TRIGGER {trigger}")
    _sql(statement)
    _sql(f"ALTER TABLE {table} ENABLE TRIGGER {trigger}")


def _some_events(client, org, n: int = 3) -> None:
    from uuid import uuid4

    for _ in range(n):
        slug = f"p-{uuid4().hex[:8]}"
        r = client.post("/api/v1/projects/", {"organization": str(org.pk), "slug": slug, "name": slug})
        assert r.status_code == 201, r.content


@pytest.mark.django_db
@pytest.mark.parametrize("statement", ["TRUNCATE audit_auditevent", "TRUNCATE audit_auditevent CASCADE",
                                       "TRUNCATE audit_auditchainlink", "UPDATE audit_auditevent SET action = 'x'",
                                       "DELETE FROM audit_auditevent"])
def test_audit_rows_cannot_be_truncated_updated_or_deleted(statement):
    org, _owner, client = org_owner_client()
    _link_now()
    _some_events(client, org, 1)
    before = AuditEvent.objects.count()
    _sql("SET CONSTRAINTS ALL IMMEDIATE")  # TRUNCATE refuses tables with pending trigger events otherwise
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        _sql(statement)
    assert AuditEvent.objects.count() == before


@pytest.mark.django_db
def test_export_is_a_verifiable_chain_and_tampering_is_reported_at_the_first_broken_link():
    org, _owner, client = org_owner_client()
    _link_now()
    _some_events(client, org, 4)
    staff = client_for(token_for(make_user("ops@provider.test", staff_role="operator"), staff=True))
    report = staff.get("/api/v1/audit-events/verify/").json()
    assert report["ok"] is True and report["broken"] is None and report["checked"] == AuditEvent.objects.count()
    export = staff.get("/api/v1/audit-events/export/")
    assert export.status_code == 200 and export["Content-Type"] == "application/jsonl"
    lines = [json.loads(line) for line in export.content.decode().splitlines()]
    assert [x["seq"] for x in lines] == list(range(1, len(lines) + 1))
    assert lines[0]["prev_hash"] == GENESIS_HASH
    assert all(b["prev_hash"] == a["hash"] for a, b in zip(lines, lines[1:], strict=False))
    assert lines[-1]["hash"] == report["head_hash"]
    tail = staff.get("/api/v1/audit-events/export/", {"after_seq": lines[1]["seq"], "limit": 1})
    assert [json.loads(x)["seq"] for x in tail.content.decode().splitlines()] == [3]

    victim = lines[2]
    _around_trigger("audit_auditevent", "audit_event_no_update",
                    f"UPDATE audit_auditevent SET actor_email = 'someone-else@acme.test' WHERE id = '{victim['id']}'")
    report = staff.get("/api/v1/audit-events/verify/").json()
    assert report["ok"] is False
    assert report["broken"] == {"reason": "hash_mismatch", "seq": victim["seq"], "event_id": victim["id"]}
    assert (report["checked"], report["head_hash"]) == (victim["seq"] - 1, lines[1]["hash"])
    with pytest.raises(CommandError, match=f"hash_mismatch at seq {victim['seq']}"):
        call_command("audit_verify", stdout=io.StringIO())


@pytest.mark.django_db
def test_a_deleted_event_or_link_and_an_unchained_event_are_found():
    org, _owner, client = org_owner_client()
    _link_now()
    _some_events(client, org, 3)
    links = list(AuditChainLink.objects.order_by("seq"))
    _around_trigger("audit_auditevent", "audit_event_no_update",
                    f"DELETE FROM audit_auditevent WHERE id = '{links[1].event_id}'")
    assert (audit_chain_verify().broken.reason, audit_chain_verify().broken.seq) == ("event_missing", links[1].seq)
    _around_trigger("audit_auditchainlink", "audit_chain_no_update",
                    f"DELETE FROM audit_auditchainlink WHERE seq = {links[1].seq}")
    assert (audit_chain_verify().broken.reason, audit_chain_verify().broken.seq) == ("gap", links[2].seq)


@pytest.mark.django_db
def test_an_event_written_with_the_chain_trigger_disabled_is_unchained():
    org, _owner, client = org_owner_client()
    _link_now()
    _some_events(client, org, 1)
    assert audit_chain_verify().ok
    _sql("SET CONSTRAINTS ALL IMMEDIATE")
    _sql("ALTER TABLE audit_auditevent DISABLE TRIGGER audit_event_chain")
    _some_events(client, org, 1)
    _sql("SET CONSTRAINTS ALL IMMEDIATE")
    _sql("ALTER TABLE audit_auditevent ENABLE TRIGGER audit_event_chain")
    broken = audit_chain_verify().broken
    assert broken.reason == "unchained" and broken.event_id == str(AuditEvent.objects.order_by("-created_at")[0].pk)


@pytest.mark.django_db
def test_tenants_cannot_export_or_verify():
    org, _owner, client = org_owner_client()
    for path in ("/api/v1/audit-events/export/", "/api/v1/audit-events/verify/"):
        r = client.get(path)
        assert (r.status_code, r.json()["code"]) == (404, "not_found")


@pytest.mark.django_db(transaction=True)
def test_events_are_linked_when_their_transaction_commits_in_commit_order():
    org = make_org("acme")
    owner = make_user("owner@acme.test")
    member(owner, org, OrgRole.OWNER)
    client = client_for(token_for(owner, organization=org))
    linked = AuditChainLink.objects.count()  # the token's creation, committed already
    assert linked == AuditEvent.objects.count() == 1
    with transaction.atomic():
        _some_events(client, org, 2)
        assert AuditChainLink.objects.count() == linked  # not before the commit
    assert AuditChainLink.objects.count() == AuditEvent.objects.count() == 3
    _some_events(client, org, 1)
    assert [link.event.target_id for link in AuditChainLink.objects.order_by("seq")][-1] == str(
        AuditEvent.objects.order_by("-created_at")[0].target_id)
    out = io.StringIO()
    call_command("audit_verify", stdout=out)
    assert "intact: 4 events" in out.getvalue()
    out = io.StringIO()
    call_command("audit_export", "--after-seq", "2", stdout=out)
    assert [json.loads(line)["seq"] for line in out.getvalue().splitlines()] == [3, 4]
