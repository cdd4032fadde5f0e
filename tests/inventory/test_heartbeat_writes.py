"""A heartbeat that changes nothing writes no row and reads one; the batched last-seen times reach the database
on flush; the cached credential is dropped when it is revoked."""

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
    agent_command_enqueue,
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
def enrolled(settings):
    settings.HOST_ACCEPTANCE_CHECK = False  # enrolled straight to available: acceptance is tests/health/test_repair.py's
    last_seen.redis_client().delete(last_seen.KEY, f"{last_seen.KEY}:flushing")
    staff = User.objects.create_user("ops@provider.test", staff_role=StaffRole.OPERATOR)
    zone = Zone.objects.create(name="z1", region=Region.objects.create(name="r1"))
    host = Host.objects.create(name="hgx-01", zone=zone, serial="SER-1", numa_nodes=2)
    backend = FakeBackend("hgx-h100", host_id=7)
    _, token = enrollment_token_create(actor=staff, host=host)
    _, clear = agent_enroll(token=token, inventory=collect(backend), agent_version="1.0")
    yield host, backend, clear
    last_seen.redis_client().delete(last_seen.KEY, f"{last_seen.KEY}:flushing")


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


def test_steady_heartbeat_reads_one_row_and_an_idle_poll_one(enrolled, api_client, django_assert_num_queries):
    """The credential comes from the cache after the first request; the heartbeat's one read gives the host's
    state and the pending commands; a poll with nothing newly queued is one read, no transaction."""
    host, _, clear = enrolled
    auth = {"HTTP_AUTHORIZATION": f"Agent {clear}"}
    assert api_client.post("/api/v1/agent/heartbeat", {"agent_version": "1.0"}, **auth).status_code == 200
    before = _rows_written()
    with django_assert_num_queries(1):
        r = api_client.post("/api/v1/agent/heartbeat", {"agent_version": "1.0"}, **auth)
    assert r.status_code == 200 and r.json() == {"host": "hgx-01", "state": "available", "pending_commands": 0}
    with django_assert_num_queries(1):
        assert api_client.get("/api/v1/agent/commands", **auth).json() == []
    assert _rows_written() - before == 0
    agent_command_enqueue(actor=None, host=host, kind="reset_gpu", payload={"gpu_index": 0})
    host.state = "cordoned"
    host.save(update_fields=["state"])
    r = api_client.post("/api/v1/agent/heartbeat", {"agent_version": "1.0"}, **auth)
    assert r.json() == {"host": "hgx-01", "state": "cordoned", "pending_commands": 1}  # not a cached answer
    [cmd] = api_client.get("/api/v1/agent/commands", **auth).json()
    assert cmd["kind"] == "reset_gpu" and cmd["status"] == "dispatched"


def test_a_revoked_credential_is_refused_at_once_though_it_was_cached(enrolled, api_client,
                                                                       django_capture_on_commit_callbacks):
    host, backend, old = enrolled
    auth = {"HTTP_AUTHORIZATION": f"Agent {old}"}
    assert api_client.post("/api/v1/agent/heartbeat", {}, **auth).status_code == 200  # now cached
    assert agent_authenticate(old) is not None
    _, token = enrollment_token_create(actor=None, host=host)
    with django_capture_on_commit_callbacks(execute=True):
        _, new = agent_enroll(token=token, inventory=collect(backend), agent_version="1.0")  # revokes the old one
    r = api_client.post("/api/v1/agent/heartbeat", {}, **auth)
    assert r.status_code == 401 and r["Content-Type"].startswith("application/problem+json")
    assert agent_authenticate(old) is None and agent_authenticate(new).host_id == host.pk
    # a wrong secret with a cached prefix is refused too: the cache holds the hash, not a verdict
    assert agent_authenticate(new.split(".")[0] + ".not-the-secret") is None


def test_without_redis_the_credential_is_read_from_the_database(enrolled, django_assert_num_queries):
    import redis

    host, _, clear = enrolled
    working, last_seen._client = last_seen._client, redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    try:
        with django_assert_num_queries(1):
            cred = agent_authenticate(clear)
        assert cred.host_id == host.pk
        with django_assert_num_queries(1):
            assert agent_authenticate(clear) is not None  # nothing cached: the database again
    finally:
        last_seen._client = working
