"""Bare-metal instances inside a private-cloud lease of whole hosts (fake bare-metal driver, real runner, real
ledger): created `market: lease` through /instance-requests they land on a leased host, nested in the lease's
rows (billed with the lease, not on demand); the lease's end undeploys and cleans them, each with a receipt,
however many times the end is run; what the lease cannot hold answers 409 problem+json, nothing written."""
from __future__ import annotations

import pytest

from apps.baremetal.models import BaremetalNode, ExitReceipt
from apps.billing.registry import usage_sources
from apps.compute.models import Instance
from apps.inventory.models import Host
from apps.operations.models import Operation
from apps.reservations.services.leases import leases_advance
from apps.scheduling.models import Allocation
from tests.reservations.conftest import at, gpu_quota, lease

from .conftest import bm_host, drive, enroll

pytestmark = pytest.mark.django_db


@pytest.fixture
def nodes(world, bm_driver, clock):
    gpu_quota(world.org_a, 64)
    out = []
    for _ in range(2):
        node_id, op = enroll(world.staff_client, bm_host())
        assert op.status == "succeeded"
        out.append(BaremetalNode.objects.select_related("host").get(pk=node_id))
    return out


@pytest.fixture
def clock():
    import time_machine

    with time_machine.travel(at(8), tick=False) as traveller:
        yield traveller


def _active_lease(world, clock, **kw):
    le = lease(world.project_a, start=at(9), end=at(12), kind="hosts", count=1, **kw)
    assert le.status == "confirmed", (le.reason, le.explanation)
    clock.move_to(at(9))
    leases_advance()
    le.refresh_from_db()
    assert le.status == "active"
    return le


def _request(world, flavor, name, **extra):
    body = {"project": str(world.project_a.pk), "name": name, "flavor": str(flavor.pk),
            "image": str(world.image.pk), **extra}
    return world.client_a.post("/api/v1/instance-requests", body, format="json")


def test_a_bare_metal_instance_in_a_lease_lands_on_a_leased_host_and_is_billed_with_the_lease(
        world, bm_driver, bm_flavor, nodes, clock):
    le = _active_lease(world, clock)
    leased_host = Allocation.objects.filter(consumer_id=le.pk).values_list("host_id", flat=True).distinct().get()
    r = _request(world, bm_flavor, "bm-lease", market="lease", lease=str(le.pk))
    assert r.status_code == 202, r.content
    body = r.json()
    assert (body["capacity"]["market"], body["capacity"]["lease"]) == ("lease", str(le.pk))
    op = drive(body["operation"]["id"])
    assert (op.status, op.kind) == ("succeeded", "baremetal.instance.create"), (op.error_code, op.error_detail)
    inst = Instance.objects.get(pk=body["instance"]["id"])
    assert (inst.status, inst.host_id) == ("active", leased_host)
    gpu_rows = Allocation.objects.filter(consumer_id=inst.pk, resource_class="gpu")
    assert gpu_rows.count() == 8 and all(a.parent.consumer_id == le.pk for a in gpu_rows)
    assert {a.period.upper for a in gpu_rows} == {at(12)}
    clock.move_to(at(11))
    usage = usage_sources()
    assert [i.resource_id for i in usage["compute.instance"](at(8), at(13))] == []  # not on demand
    (leased,) = usage["reservations.lease"](at(8), at(13))
    assert leased.resource_id == str(le.pk)



def test_what_the_lease_cannot_hold_is_refused_at_the_request_with_nothing_written(world, bm_driver, bm_flavor,
                                                                                   nodes, clock):
    le = _active_lease(world, clock)
    first = _request(world, bm_flavor, "bm-a", market="lease", lease=str(le.pk))
    assert drive(first.json()["operation"]["id"]).status == "succeeded"
    before = (Instance.objects.count(), Operation.objects.count())
    second = _request(world, bm_flavor, "bm-b", market="lease", lease=str(le.pk))
    assert second.status_code == 409, second.content
    assert second["Content-Type"].startswith("application/problem+json")
    problem = second.json()
    assert (problem["code"], problem["lease"]) == ("capacity_unavailable", str(le.pk))
    assert "lease" in problem["detail"] and problem["constraint"]
    assert (Instance.objects.count(), Operation.objects.count()) == before  # the other host stays on demand
    on_demand = world.client_a.post("/api/v1/instances/", {
        "project": str(world.project_a.pk), "name": "bm-od", "flavor": str(bm_flavor.pk),
        "image": str(world.image.pk)}, format="json")
    assert on_demand.status_code == 202 and drive(on_demand.data["operation"]["id"]).status == "succeeded"
    leased = set(Allocation.objects.filter(consumer_id=le.pk).values_list("host_id", flat=True))
    assert Instance.objects.get(pk=on_demand.data["instance"]["id"]).host_id not in leased
    # inside a lease the GPUs are the lease's, but the project's vCPU quota still counts the host's vCPUs
    from apps.tenancy.models import Quota

    Quota.objects.update_or_create(organization=world.org_a, project=None, resource="vcpus",
                                   defaults={"limit": 2 * bm_flavor.vcpus - 1})
    drive(world.client_a.delete(f"/api/v1/instances/{first.json()['instance']['id']}/").data["operation"]["id"])
    before = (Instance.objects.count(), Operation.objects.count())
    over = _request(world, bm_flavor, "bm-c", market="lease", lease=str(le.pk))
    assert (over.status_code, over.json()["code"]) == (422, "quota_exceeded"), over.content
    assert over["Content-Type"].startswith("application/problem+json")
    assert (Instance.objects.count(), Operation.objects.count()) == before


def _receipts(inst_id) -> int:
    return ExitReceipt.objects.filter(instance_id=inst_id).count()


def _finish_all(inst_id):
    for op in Operation.objects.filter(target_id=inst_id).order_by("created_at"):
        drive(op.pk)


def test_the_lease_end_undeploys_and_cleans_its_bare_metal_instances_once_with_receipts(
        world, bm_driver, bm_flavor, nodes, clock):
    """end_action `stop` (the default) still deletes a bare-metal instance: its host returns to the pool. One
    instance is active, the other still deploying when the lease ends (its create is cancelled by the delete)."""
    from apps.operations.runner import operation_run_step

    le = lease(world.project_a, start=at(9), end=at(12), kind="hosts", count=2)
    assert (le.status, le.end_action) == ("confirmed", "stop")
    clock.move_to(at(9))
    leases_advance()
    active = _request(world, bm_flavor, "bm-a", market="lease", lease=str(le.pk)).json()
    assert drive(active["operation"]["id"]).status == "succeeded"
    deploying = _request(world, bm_flavor, "bm-b", market="lease", lease=str(le.pk)).json()
    for _ in range(3):  # place_and_claim, attach_networks, deploy (asked, not finished)
        operation_run_step(deploying["operation"]["id"])
    ids = [active["instance"]["id"], deploying["instance"]["id"]]
    hosts = [Instance.objects.get(pk=i).host_id for i in ids]
    assert bm_driver.get(BaremetalNode.objects.get(host_id=hosts[1]).ironic_id).instance_id == ids[1]

    clock.move_to(at(12))
    assert leases_advance()["ended"] == 1
    # in the lease end's transaction: the hosts leave placement before any undeploy ran (they still carry images)
    assert [Host.objects.get(pk=h).state for h in hosts] == ["maintenance", "maintenance"]
    assert [Instance.objects.get(pk=i).status for i in ids] == ["deleting", "deleting"]
    assert Operation.objects.get(pk=deploying["operation"]["id"]).status == "cancelled"
    assert leases_advance()["ended"] == 0  # a second tick, a placement's end-due check: nothing asked twice
    from apps.reservations.services.leases import leases_end_due

    assert leases_end_due() == 0
    for inst_id in ids:
        _finish_all(inst_id)
        _finish_all(inst_id)
    for inst_id, host_id in zip(ids, hosts, strict=True):
        assert Instance.objects.get(pk=inst_id).status == "deleted"
        assert Operation.objects.filter(target_id=inst_id, kind="baremetal.instance.delete").count() == 1
        assert _receipts(inst_id) == 1
        seen = bm_driver.get(BaremetalNode.objects.get(host_id=host_id).ironic_id)
        assert (seen.state.provision, seen.instance_id) == ("available", "")
        assert Host.objects.get(pk=host_id).state == "available"
    listed = world.client_a.get(f"/api/v1/bare-metal/exit-receipts/?instance={ids[0]}").json()["results"]
    import json

    steps = {s["step"]: s["result"] for s in json.loads(listed[0]["payload"])["steps"]}
    assert (steps["undeploy"], steps["automated_cleaning"]) == ("succeeded", "succeeded")
    assert not Allocation.objects.filter(consumer_id__in=ids, period__upper_inf=True).exists()
