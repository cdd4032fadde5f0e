"""Parallel requests on remediation rows (real threads, one PostgreSQL connection each): eight approvals of one
remediation approve it once (the rest 409 `invalid_state`, never a 500); eight policy PUTs leave one policy row."""

import pytest

from apps.health.models import HealthEvent, Remediation, RemediationPolicy
from apps.tenancy.models import OrgRole
from tests.inventory.helpers import make_host
from tests.parallel import client_like, outcome, run_parallel
from tests.tenancy.helpers import client_for, make_user, member, token_for

pytestmark = pytest.mark.django_db(transaction=True)
N = 8


def test_parallel_approvals_approve_once(world):
    host = make_host("par-h1", gpus=1)
    event = HealthEvent.objects.create(
        host=host, gpu=host.gpus.first(), kind="xid", xid=79, observed_at=host.created_at, dedup_key="par"
    )
    # its instance id names no instance, so the approval that wins cancels it at once (nothing to move)
    rem = Remediation.objects.create(
        project=world.project_a,
        event=event,
        resource_id="0190aaaa-0000-7000-8000-00000000000c",
        from_host=host,
        consent_mode="propose",
        status="proposed",
    )
    path = f"/api/v1/remediations/{rem.pk}/approve"
    responses = run_parallel(N, lambda i: client_like(world.client_a).post(path))
    assert outcome(responses) == {(200, None): 1, (409, "invalid_state"): N - 1}
    rem.refresh_from_db()
    assert rem.status == "cancelled" and rem.approved_at is not None


def test_parallel_policy_puts_leave_one_row(world):
    owner = make_user("par-owner@compute-a.test")
    member(owner, world.org_a, OrgRole.OWNER)
    client = client_for(token_for(owner, organization=world.org_a))
    path = f"/api/v1/projects/{world.project_a.pk}/remediation-policy"
    modes = ["auto", "propose", "off", "auto"] * 2
    responses = run_parallel(
        N, lambda i: client_like(client).put(path, {"consent_mode": modes[i]}, format="json")
    )
    assert outcome(responses) == {(200, None): N}
    (row,) = RemediationPolicy.objects.filter(project=world.project_a)
    assert row.consent_mode in modes and row.notice_seconds == 900


def test_ingest_waiting_on_a_gpu_does_not_deadlock_a_holder_that_names_the_host():
    """A transaction holding a GPU row (a command queued for it) inserts a row naming the GPU's host: its foreign
    key takes FOR KEY SHARE on the host at commit. An ingest of that GPU waits for the GPU holding the host's
    lock meanwhile; both finish (the host lock was FOR UPDATE, which conflicts with KEY SHARE: PostgreSQL aborted
    one of them as a deadlock, the agent's report answered 503 `contention`)."""
    import time

    from django.db import connection, transaction

    from apps.health.services import health_event_ingest
    from apps.inventory.models import AgentCommand, Gpu

    host = make_host("par-dl", gpus=1)
    gpu = host.gpus.get()

    def holder():
        with transaction.atomic():
            Gpu.objects.select_for_update().get(pk=gpu.pk)
            with connection.cursor() as cur:  # until the ingest waits for this GPU row
                for _ in range(200):
                    cur.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                " AND query LIKE %s", ["%inventory_gpu%FOR UPDATE%"])
                    if cur.fetchone()[0]:
                        break
                    time.sleep(0.05)
            AgentCommand.objects.create(host=host, gpu=gpu, kind="reset_gpu", payload={"gpu_index": 0})
        return "committed"

    def ingest():
        time.sleep(0.3)  # the holder has the GPU row first
        event, created = health_event_ingest(actor=None, host=host, kind="xid", xid=48, gpu_index=0)
        return created

    results = run_parallel(2, lambda i: (holder, ingest)[i]())
    assert results == ["committed", True]
    assert HealthEvent.objects.filter(host=host).count() == 1 and AgentCommand.objects.filter(host=host).count() == 1
