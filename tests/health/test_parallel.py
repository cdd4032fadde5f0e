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
