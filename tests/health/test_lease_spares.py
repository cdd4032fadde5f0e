"""A lease's host replacement from the spare pool, end to end through the fake backends with explicit times: an
XID 79 reported by the node agent on the GPU of a VM inside a lease → the lease's capacity on the failed host
moves to a free spare host of the same GPU model (same count) in the event's transaction, the spare leaves the
pool → the VM's ordinary remediation (checkpoint notice, `auto` after the deadline) re-creates it on the spare,
inside the lease. Without a free spare the lease stays held and the event and the remediation say so."""

from __future__ import annotations

import datetime as dt

import pytest

from apps.compute.models import Instance
from apps.health.models import Remediation
from apps.health.services.remediation import remediations_advance
from apps.inventory.models import Host
from apps.inventory.services.hosts import host_spare_set
from apps.reservations.services.leases import leases_advance
from apps.scheduling.models import Allocation
from tests.reservations.conftest import at, clock, finish, gpu_host, lease  # noqa: F401  (fixture)

from .test_api import _agent, _staff

pytestmark = pytest.mark.django_db
FAULT = at(10)


def _lease_with_vm(world, clock):  # noqa: F811
    le = lease(world.project_a, start=at(9), end=at(12), kind="hosts", count=1)
    clock.move_to(at(9))
    leases_advance()
    r = world.client_a.post(
        "/api/v1/instance-requests",
        {"project": str(world.project_a.pk), "name": "in-lease", "flavor": str(world.gpu1.pk),
         "image": str(world.image.pk), "market": "lease", "lease": str(le.pk)},
        format="json",
    )
    assert r.status_code == 202, r.content
    assert finish(r.json()["operation"]["id"]).status == "succeeded"
    inst = Instance.objects.select_related("host").get(pk=r.json()["instance"]["id"])
    return le, inst


def _xid79(host, gpu_index):
    r = _agent(host).post(
        "/api/v1/agent/health-events",
        {"kind": "xid", "xid": 79, "gpu_index": gpu_index, "observed_at": FAULT.isoformat()},
        format="json",
    )
    assert r.status_code == 201, r.content
    return r.json()


def _live_hosts(consumer_id, now=FAULT):
    return {a.host_id for a in Allocation.objects.filter(consumer_id=consumer_id, period__endswith__gt=now)}


def test_a_lease_on_a_failed_host_moves_to_a_free_spare_and_its_vm_follows(world, clock):  # noqa: F811
    gpu_host(), gpu_host()
    spare = gpu_host()
    host_spare_set(actor=None, host=spare, spare=True, reason="spare pool")
    le, inst = _lease_with_vm(world, clock)
    failed = inst.host
    assert failed.pk != spare.pk and _live_hosts(le.pk) == {failed.pk}  # leases never take a spare

    clock.move_to(FAULT)
    gpu_index = Allocation.objects.get(consumer_id=inst.pk, resource_class="gpu").gpu.index
    body = _xid79(failed, gpu_index)
    assert body["applied"]["lease_spares"] == [
        {"lease": str(le.pk), "from_host": failed.name, "to_host": spare.name, "gpus": 8, "reason": ""}
    ]
    # the lease's capacity moved in the event's transaction: old rows end at the fault, new ones on the spare
    # up to the lease's end; the spare left the pool; the VM still runs on the failed host until it moves
    assert _live_hosts(le.pk) == {spare.pk}
    moved = Allocation.objects.filter(consumer_id=le.pk, host=spare)
    assert moved.count() == 8 and {(a.period.lower, a.period.upper) for a in moved} == {(FAULT, at(12))}
    assert {a.period.upper for a in Allocation.objects.filter(consumer_id=le.pk, host=failed)} == {FAULT}
    assert Host.objects.get(pk=spare.pk).spare is False
    (rem_id,) = body["applied"]["remediations"]
    rem = Remediation.objects.get(pk=rem_id)
    assert (rem.status, rem.reason) == ("notice", "")  # an ordinary remediation, under the consent mode
    assert _live_hosts(inst.pk) == {failed.pk}

    clock.move_to(rem.deadline_at)
    assert remediations_advance()["started"] == 1
    rem.refresh_from_db()
    assert finish(rem.operation_id).status == "succeeded"
    assert remediations_advance()["finished"] == 1
    rem.refresh_from_db()
    inst.refresh_from_db()
    assert (rem.status, rem.to_host_id, inst.status, inst.host_id) == ("succeeded", spare.pk, "active", spare.pk)
    row = Allocation.objects.get(consumer_id=inst.pk, resource_class="gpu", period__upper_inf=False,
                                 host=spare)
    assert row.parent.consumer_id == le.pk and row.parent.host_id == spare.pk  # inside the lease, on the spare
    assert _live_hosts(inst.pk, rem.started_at) == {spare.pk}  # the old allocation on the failed host ended


def test_without_a_free_spare_the_lease_stays_held_and_the_event_says_so(world, clock):  # noqa: F811
    gpu_host(), gpu_host()
    le, inst = _lease_with_vm(world, clock)
    failed = inst.host
    busy_spare = gpu_host(model="A100-SXM4-80GB")  # a spare of another model does not fit
    host_spare_set(actor=None, host=busy_spare, spare=True, reason="spare pool")

    clock.move_to(FAULT)
    gpu_index = Allocation.objects.get(consumer_id=inst.pk, resource_class="gpu").gpu.index
    body = _xid79(failed, gpu_index)
    (swap,) = body["applied"]["lease_spares"]
    assert (swap["to_host"], swap["gpus"]) == (None, 8)
    assert swap["reason"] == "no free spare host with 8 H100-SXM5-80GB GPUs: the lease stays held"
    assert _live_hosts(le.pk) == {failed.pk}
    rem = Remediation.objects.get(pk=body["applied"]["remediations"][0])
    assert rem.status == "held" and rem.reason.startswith("inside a lease: no free spare host")
    assert Host.objects.get(pk=busy_spare.pk).spare is True
    clock.move_to(FAULT + dt.timedelta(hours=1))
    assert remediations_advance() == {"started": 0, "finished": 0}
    inst.refresh_from_db()
    assert inst.host_id == failed.pk


def _held_lease(world, clock):  # noqa: F811
    """A lease whose host failed with no free spare: held, its VM's remediation held."""
    gpu_host(), gpu_host()
    le, inst = _lease_with_vm(world, clock)
    clock.move_to(FAULT)
    gpu_index = Allocation.objects.get(consumer_id=inst.pk, resource_class="gpu").gpu.index
    body = _xid79(inst.host, gpu_index)
    assert body["applied"]["lease_spares"][0]["held"] is True
    return le, inst, body


def test_a_host_staff_mark_spare_goes_to_the_oldest_held_lease_and_its_vm_moves(world, clock):  # noqa: F811
    le, inst, body = _held_lease(world, clock)
    failed = inst.host
    clock.move_to(FAULT + dt.timedelta(minutes=5))
    new = gpu_host()
    staff = _staff()
    for refused in ({"spare": True}, {"spare": True, "reason": ""}):  # 400 `reason_required`, nothing changes
        r = staff.post(f"/api/v1/hosts/{new.pk}/spare/", refused, format="json")
        assert (r.status_code, r.json()["code"], r.json()["errors"]) == (400, "reason_required",
                                                                        {"reason": ["required"]}), r.content
        assert Host.objects.get(pk=new.pk).spare is False
    r = staff.post(f"/api/v1/hosts/{new.pk}/spare/", {"spare": True, "reason": "new spare"}, format="json")
    assert r.status_code == 200, r.content
    # in the same transaction the held lease took it: the host left the pool again, the lease's rows moved
    assert r.json()["spare"] is False and Host.objects.get(pk=new.pk).spare is False
    assert _live_hosts(le.pk, FAULT + dt.timedelta(minutes=5)) == {new.pk}
    from apps.audit.models import AuditEvent
    from apps.health.models import HealthEvent

    (record,) = HealthEvent.objects.get(pk=body["id"]).applied["lease_spares"]
    assert (record["to_host"], record["held"], record["reason"]) == (new.name, False, "")
    audit = AuditEvent.objects.filter(action="health.lease.replace_host", target_id=str(le.pk)).order_by("-created_at")[0]
    assert audit.after["late"] is True and audit.after["to_host"] == new.name
    # the VM's held remediation is followed by an ordinary one, under the consent mode; it moves onto the spare
    rem = Remediation.objects.get(resource_id=inst.pk, status="notice")
    assert str(rem.event_id) == body["id"]
    clock.move_to(rem.deadline_at)
    assert remediations_advance()["started"] == 1
    rem.refresh_from_db()
    assert finish(rem.operation_id).status == "succeeded"
    remediations_advance()
    inst.refresh_from_db()
    assert (inst.status, inst.host_id) == ("active", new.pk) and failed.pk != new.pk
    # idempotent: another spare and the beat's sweep move nothing more
    from apps.health.tasks import lease_spares_sweep_task

    other = gpu_host()
    host_spare_set(actor=None, host=other, spare=True, reason="pool")
    assert lease_spares_sweep_task() == 0 and Host.objects.get(pk=other.pk).spare is True


def test_a_spare_back_in_service_goes_to_the_held_lease(world, clock):  # noqa: F811
    from apps.health.services.lease_spares import lease_spares_backfill
    from apps.health.tasks import lease_spares_sweep_task
    from apps.inventory.services.hosts import host_cordon, host_mark_available

    le, inst, _body = _held_lease(world, clock)
    spare = gpu_host()
    host_cordon(actor=None, host=spare, reason="burn-in")
    host_spare_set(actor=None, host=spare, spare=True, reason="pool")  # not available: nothing moves yet
    assert Host.objects.get(pk=spare.pk).spare is True and lease_spares_backfill() == []
    assert _live_hosts(le.pk) == {inst.host_id}
    host_mark_available(actor=None, host=spare, reason="burn-in passed")  # a spare back in service: taken
    assert Host.objects.get(pk=spare.pk).spare is False
    assert _live_hosts(le.pk, now=FAULT + dt.timedelta(seconds=1)) == {spare.pk}
    assert lease_spares_sweep_task() == 0


def test_two_held_leases_the_oldest_held_gets_the_first_spare(world, clock):  # noqa: F811
    from apps.tenancy.models import Quota

    Quota.objects.update_or_create(organization=world.org_a, project=None, resource="gpus", defaults={"limit": 32})
    gpu_host(), gpu_host()
    first = lease(world.project_a, start=at(9), end=at(12), kind="hosts", count=1)
    second = lease(world.project_a, start=at(9), end=at(12), kind="hosts", count=1)
    clock.move_to(at(9))
    leases_advance()
    failed = {}
    for i, (le, when) in enumerate(((first, FAULT), (second, FAULT + dt.timedelta(minutes=1)))):
        (host_id,) = _live_hosts(le.pk, at(9))
        failed[le.pk] = Host.objects.get(pk=host_id)
        clock.move_to(when)
        r = _agent(failed[le.pk]).post(
            "/api/v1/agent/health-events",
            {"kind": "xid", "xid": 79, "gpu_index": 0, "observed_at": when.isoformat(), "dedup_key": f"k{i}"},
            format="json",
        )
        assert r.status_code == 201, r.content
        assert r.json()["applied"]["lease_spares"][0]["held"] is True
    clock.move_to(FAULT + dt.timedelta(minutes=5))
    spare = gpu_host()
    host_spare_set(actor=None, host=spare, spare=True, reason="pool")
    now = FAULT + dt.timedelta(minutes=5)
    assert _live_hosts(first.pk, now) == {spare.pk}  # held first, served first
    assert _live_hosts(second.pk, now) == {failed[second.pk].pk}
    spare2 = gpu_host()
    host_spare_set(actor=None, host=spare2, spare=True, reason="pool")
    assert _live_hosts(second.pk, now) == {spare2.pk}
