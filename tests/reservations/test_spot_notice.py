"""The spot notice holds whatever a lease asks: a lease confirmed to start within `RESERVATIONS_SPOT_GRACE_S`
on GPUs spot instances run on starts after the notice (the answer shows the real start); spot instances on an
active lease's idle GPUs are told to go, with the same notice, when the lease's owner launches there."""
import datetime as dt

import pytest

from apps.compute.models import Instance
from apps.operations.models import Operation
from apps.reservations.models import InstanceTerms, Lease
from apps.reservations.services.leases import leases_advance
from apps.scheduling.models import Allocation

from .conftest import T0, at, finish, flavor8, gpu_host, lease
from .test_instances import _request

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _room(world, settings):
    from apps.tenancy.models import Quota

    settings.RESERVATIONS_SPOT_GRACE_S = 120
    Quota.objects.filter(organization__in=[world.org_a, world.org_b], project=None, resource="gpus").update(limit=9)


def _spot(world, name="spot-1"):
    body = _request(world, world.gpu1, name, client=world.client_b, project=world.project_b, market="spot")
    assert finish(body["operation"]["id"]).status == "succeeded"
    return body["instance"]["id"]


def _lease_now(world, end="2026-03-01T10:00:00Z"):
    return world.client_a.post("/api/v1/leases", {
        "project": str(world.project_a.pk), "name": "now", "kind": "gpus", "gpu_model": "H100-SXM5-80GB",
        "count": 8, "start": "now", "end": end}, format="json")


def test_a_lease_starting_now_on_spot_gpus_starts_after_the_notice(world, clock):
    gpu_host()
    spot = _spot(world)
    r = _lease_now(world)
    assert r.status_code == 201, r.content
    assert r.json()["start"] == "2026-03-01T08:02:00Z"  # the real start: now + the 120 s notice
    le = Lease.objects.get(pk=r.json()["id"])
    assert le.start == T0 + dt.timedelta(seconds=120) and le.status == "confirmed"
    periods = {a.period.lower for a in Allocation.objects.filter(consumer_id=le.pk)}
    assert periods == {le.start}
    terms = InstanceTerms.objects.get(instance_id=spot)
    assert terms.interruption_at == le.start  # told at once: the full notice
    clock.move_to(at(8, 1, ))
    assert leases_advance()["activated"] == 0
    clock.move_to(at(8, 2))
    out = leases_advance()
    assert (out["activated"], out["preempted"]) == (1, 1)


def test_a_lease_starting_now_without_spot_keeps_its_start(world, clock):
    gpu_host()
    r = _lease_now(world)
    assert r.status_code == 201 and r.json()["start"] == "2026-03-01T08:00:00Z"
    assert leases_advance()["activated"] == 1


def test_a_window_shorter_than_the_notice_is_refused(world, clock):
    gpu_host()
    _spot(world)
    r = _lease_now(world, end="2026-03-01T08:01:00Z")
    assert r.status_code == 409 and r.json()["constraint"] == "spot_notice"
    assert Lease.objects.get().status == "rejected"
    assert not InstanceTerms.objects.filter(interruption_at__isnull=False).exists()


def _instant(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _check_now(world, end="2026-03-01T10:00:00Z"):
    r = world.client_a.post("/api/v1/leases/check/", {
        "project": str(world.project_a.pk), "name": "now", "kind": "gpus", "gpu_model": "H100-SXM5-80GB",
        "count": 8, "start": "now", "end": end}, format="json")
    assert r.status_code == 200, r.content
    return r.json()


def test_the_check_answers_the_start_after_the_notice_as_the_create_confirms_it(world, clock):
    """The launch check runs the confirm's spot notice: a lease asked to start now on GPUs spot instances run on
    is placeable with the start the create then confirms (now + notice); the check tells no spot instance."""
    gpu_host()
    spot = _spot(world)
    body = _check_now(world)
    assert (body["placeable"], body["code"], _instant(body["start"])) == (True, None, T0 + dt.timedelta(seconds=120))
    assert InstanceTerms.objects.get(instance_id=spot).interruption_at is None
    assert not Lease.objects.exists()
    assert _instant(_lease_now(world).json()["start"]) == _instant(body["start"])


def test_the_check_answers_the_asked_start_without_spot(world, clock):
    gpu_host()
    body = _check_now(world)
    assert (body["placeable"], _instant(body["start"])) == (True, T0)
    assert _instant(_lease_now(world).json()["start"]) == T0


def test_the_check_refuses_a_window_shorter_than_the_notice_as_the_create_does(world, clock):
    gpu_host()
    _spot(world)
    body = _check_now(world, end="2026-03-01T08:01:00Z")
    assert (body["placeable"], body["code"], body["reason"], body["start"]) == (
        False, "capacity_unavailable", "spot_notice", None)
    assert body["explanation"]["spot_notice"] == {"notice_s": 120, "start": "2026-03-01T08:02:00+00:00"}
    assert not Lease.objects.exists()
    assert not InstanceTerms.objects.filter(interruption_at__isnull=False).exists()
    create = _lease_now(world, end="2026-03-01T08:01:00Z").json()
    assert (create["code"], create["constraint"]) == (body["code"], body["reason"])


def test_spot_on_an_active_leases_idle_gpus_is_reclaimed_when_its_owner_launches(world, clock):
    gpu_host()
    le = lease(world.project_a, start=at(9), end=at(12), count=8)
    clock.move_to(at(9))
    assert leases_advance()["activated"] == 1
    spot = _spot(world)  # spot may use the lease's idle GPUs
    assert Allocation.objects.get(consumer_id=spot, resource_class="gpu").spot
    body = _request(world, flavor8(), "all-eight", market="lease", lease=str(le.pk))
    op = finish(body["operation"]["id"])
    assert (op.status, op.step) == ("running", "place_and_claim"), (op.status, op.error_code)
    terms = InstanceTerms.objects.get(instance_id=spot)
    assert terms.interruption_at == at(9, 2) and "lease" in terms.interruption_reason
    clock.move_to(at(9, 2))
    assert leases_advance()["preempted"] == 1
    assert finish(Operation.objects.get(target_id=spot, kind="instance.delete").pk).status == "succeeded"
    op = finish(body["operation"]["id"])
    assert op.status == "succeeded", (op.step, op.error_detail)
    inst = Instance.objects.get(pk=body["instance"]["id"])
    assert Allocation.objects.filter(consumer_id=inst.pk, resource_class="gpu", parent__consumer_id=le.pk).count() == 8
