"""A heartbeat that changes nothing writes no row; the batched last-seen times reach the database on flush."""

import datetime as dt

import pytest
from django.db import connection
from gpucloud_agent.backends.fake import FakeBackend
from gpucloud_agent.inventory import collect

from apps.identity.models import StaffRole, User
from apps.inventory.models import AgentCredential, Host, Region, Zone
from apps.inventory.services import last_seen
from apps.inventory.services.agent import (
    agent_authenticate,
    agent_enroll,
    agent_heartbeat,
    enrollment_token_create,
)

pytestmark = pytest.mark.django_db


def _rows_written() -> int:
    """Rows inserted, updated or deleted so far in this (the test's) transaction, as PostgreSQL counts them."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_xact_user_tables"
        )
        return cur.fetchone()[0]


@pytest.fixture
def enrolled():
    last_seen._redis().delete(last_seen.KEY, f"{last_seen.KEY}:flushing")
    staff = User.objects.create_user("ops@provider.test", staff_role=StaffRole.OPERATOR)
    zone = Zone.objects.create(name="z1", region=Region.objects.create(name="r1"))
    host = Host.objects.create(name="hgx-01", zone=zone, serial="SER-1", numa_nodes=2)
    backend = FakeBackend("hgx-h100", host_id=7)
    _, token = enrollment_token_create(actor=staff, host=host)
    _, clear = agent_enroll(token=token, inventory=collect(backend), agent_version="1.0")
    yield host, backend, clear
    last_seen._redis().delete(last_seen.KEY, f"{last_seen.KEY}:flushing")


def test_heartbeat_with_unchanged_inventory_writes_no_row(enrolled):
    host, backend, clear = enrolled
    for inventory in (None, collect(backend)):  # plain heartbeat, then one carrying the same inventory
        before = _rows_written()
        agent_heartbeat(credential=agent_authenticate(clear), inventory=inventory, agent_version="1.0")
        assert _rows_written() - before == 0


def test_changed_inventory_and_version_are_written(enrolled):
    host, backend, clear = enrolled
    inventory = collect(backend)
    inventory["host"]["memory_mib"] = 1024
    before = _rows_written()
    agent_heartbeat(credential=agent_authenticate(clear), inventory=inventory, agent_version="1.1")
    assert _rows_written() - before == 1  # the host row only: GPUs and ports are unchanged
    host.refresh_from_db()
    assert (host.memory_mib, host.agent_version) == (1024, "1.1")


def test_flush_moves_last_seen_forward_only(enrolled):
    host, _, clear = enrolled
    host.refresh_from_db()
    enrolled_at = host.last_heartbeat_at
    agent_heartbeat(credential=agent_authenticate(clear), agent_version="1.0")
    host.refresh_from_db()
    assert host.last_heartbeat_at == enrolled_at  # not yet written
    assert last_seen.agent_last_seen_flush() == 1
    host.refresh_from_db()
    cred = AgentCredential.objects.get(host=host, revoked_at__isnull=True)
    assert host.last_heartbeat_at > enrolled_at and cred.last_seen_at == host.last_heartbeat_at
    assert last_seen.agent_last_seen_flush() == 0  # nothing new
    # a late, older batch never moves the time back
    last_seen.record(credential_id=cred.pk, host_id=host.pk, at=enrolled_at - dt.timedelta(minutes=5))
    last_seen.agent_last_seen_flush()
    host.refresh_from_db()
    assert host.last_heartbeat_at > enrolled_at
