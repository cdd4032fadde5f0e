"""Instances and capacity products: instances in a lease land only on its capacity and are stopped/deleted at
its end; spot instances are preempted within their grace period when a lease starts, and their owner sees why;
queued on-demand requests are placed in queue order when capacity frees and expire after their timeout; RW-036
(a request that cannot run because of maintenance is held with the reason, not refused)."""
import uuid

import pytest

from apps.compute.models import Instance
from apps.compute.services.instances import instance_delete
from apps.inventory.models import AgentCommand, Gpu
from apps.operations.models import Operation
from apps.operations.runner import operation_run_step
from apps.reservations.models import InstanceTerms, Notification, QueuedRequest
from apps.reservations.services.leases import leases_advance
from apps.reservations.services.queue import queue_process
from apps.scheduling.models import Allocation

from .conftest import at, finish, gpu_host, lease

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _room(world):
    """`gpus` quota: one 8-GPU lease plus one on-demand GPU; instances inside a lease need no quota of their own."""
    from apps.tenancy.models import Quota

    Quota.objects.filter(organization__in=[world.org_a, world.org_b], project=None, resource="gpus").update(limit=9)


def _request(w, flavor, name, *, client=None, project=None, **extra):
    client = client or w.client_a
    project = project or w.project_a
    body = {"project": str(project.pk), "name": name, "flavor": str(flavor.pk), "image": str(w.image.pk), **extra}
    r = client.post("/api/v1/instance-requests", body, format="json")
    assert r.status_code == 202, r.content
    return r.json()


def _active_lease(w, clock, **kw):
    le = lease(w.project_a, start=at(9), end=at(12), **kw)
    clock.move_to(at(9))
    leases_advance()
    le.refresh_from_db()
    assert le.status == "active"
    return le


@pytest.mark.parametrize("end_action,final", [("stop", "stopped"), ("delete", "deleted")])
def test_instances_in_a_lease_land_on_its_capacity_and_end_with_it(world, clock, end_action, final):
    h1, h2 = gpu_host(), gpu_host()
    le = _active_lease(world, clock, kind="hosts", count=1, end_action=end_action)
    leased_host = Allocation.objects.filter(consumer_id=le.pk).first().host_id
    body = _request(world, world.gpu1, "in-lease", market="lease", lease=str(le.pk))
    assert body["capacity"]["market"] == "lease" and body["capacity"]["lease"] == str(le.pk)
    assert finish(body["operation"]["id"]).status == "succeeded"
    inst = Instance.objects.get(pk=body["instance"]["id"])
    assert inst.host_id == leased_host
    row = Allocation.objects.get(consumer_id=inst.pk, resource_class="gpu")
    assert row.parent.consumer_id == le.pk and row.period.upper == at(12)
    outside = _request(world, world.gpu1, "on-demand")
    finish(outside["operation"]["id"])
    assert Instance.objects.get(pk=outside["instance"]["id"]).host_id == ({h1.id, h2.id} - {leased_host}).pop()
    clock.move_to(at(12))
    assert leases_advance()["ended"] == 1
    gpu = Gpu.objects.get(host_id=inst.host_id, pci_address=inst.devices["pci"][0])
    assert (gpu.scrub_state, gpu.scrub_commands) == ("dirty", [])  # released while its VM still runs: held
    op = Operation.objects.filter(target_id=inst.pk).order_by("-created_at").first()
    assert finish(op.pk).status == "succeeded"
    inst.refresh_from_db()
    assert inst.status == final
    gpu.refresh_from_db()
    reset = AgentCommand.objects.filter(host_id=inst.host_id, kind="reset_gpu").get()  # queued once the VM is off
    assert (gpu.scrub_state, reset.payload["gpu_index"], reset.status) == ("clean", gpu.index, "succeeded")
    assert not Allocation.objects.filter(consumer_id=inst.pk, period__endswith__gt=at(12)).exists()
    after = lease(world.project_b, start=at(12, 5), end=at(13), kind="hosts", count=1, name="after")
    assert Allocation.objects.filter(consumer_id=after.pk).first().host_id == leased_host  # back in the pool


def test_instance_in_a_lease_that_is_not_active_is_refused(world, clock):
    gpu_host()
    le = lease(world.project_a, start=at(9), end=at(12))
    r = world.client_a.post("/api/v1/instance-requests", {
        "project": str(world.project_a.pk), "name": "x", "flavor": str(world.gpu1.pk), "image": str(world.image.pk),
        "market": "lease", "lease": str(le.pk)}, format="json")
    assert r.status_code == 409 and r.json()["code"] == "lease_not_usable"
    assert not Instance.objects.exists()


def test_spot_is_preempted_within_its_grace_period_when_a_lease_starts(world, clock, settings):
    settings.RESERVATIONS_SPOT_GRACE_S = 120
    gpu_host()
    spot = _request(world, world.gpu1, "spot-1", client=world.client_b, project=world.project_b, market="spot")
    assert finish(spot["operation"]["id"]).status == "succeeded"
    assert Allocation.objects.get(consumer_id=spot["instance"]["id"], resource_class="gpu").spot
    le = lease(world.project_a, start=at(9), end=at(12), count=8)  # spot never blocks a lease
    clock.move_to(at(8, 57))
    assert leases_advance()["noticed_spot"] == 0
    clock.move_to(at(8, 58))
    assert leases_advance()["noticed_spot"] == 1
    cap = world.client_b.get(f"/api/v1/instances/{spot['instance']['id']}/capacity").json()
    assert cap["interruption_at"] == "2026-03-01T09:00:00Z"
    assert "lease starting 2026-03-01 09:00" in cap["interruption_reason"]
    assert world.client_a.get(f"/api/v1/instances/{spot['instance']['id']}/capacity").status_code == 404
    assert Notification.objects.filter(event="spot.preemption_notice", organization=world.org_b).exists() or \
        not world.org_b.billing_email
    clock.move_to(at(9))
    out = leases_advance()
    assert (out["activated"], out["preempted"]) == (1, 1)
    op = Operation.objects.filter(target_id=spot["instance"]["id"], kind="instance.delete").get()
    assert finish(op.pk).status == "succeeded"
    assert Instance.objects.get(pk=spot["instance"]["id"]).status == "deleted"
    assert not Allocation.objects.filter(consumer_id=spot["instance"]["id"], period__endswith__gt=at(9, 1)).exists()
    inside = _request(world, world.gpu1, "in-lease", market="lease", lease=str(le.pk))
    op = finish(inside["operation"]["id"])
    assert op.status == "succeeded", (op.step, op.error_detail)


def test_queued_requests_are_placed_in_order_and_expire(world, clock):
    gpu_host(gpus=1, nvswitch="")
    first = _request(world, world.gpu1, "holder")
    finish(first["operation"]["id"])
    q1 = _request(world, world.gpu1, "q1", client=world.client_b, project=world.project_b, queue_timeout_s=3600)
    clock.move_to(at(8, 1))
    q2 = _request(world, world.gpu1, "q2", client=world.client_b, project=world.project_b, queue_timeout_s=600)
    assert q2["capacity"]["queued_request"]["status"] == "waiting"
    assert queue_process() == {"placed": 0, "expired": 0, "waiting": 2}
    for body in (q1, q2):  # their create operations wait at the placement step
        operation_run_step(body["operation"]["id"])
        op = Operation.objects.get(pk=body["operation"]["id"])
        assert (op.status, op.step) == ("running", "place_and_claim")
    listed = world.client_b.get("/api/v1/queued-requests", {"instance": q2["instance"]["id"]}).json()["results"]
    assert listed[0]["position"] == 2 and "free GPU" in listed[0]["reason"]
    assert world.client_a.get("/api/v1/queued-requests").json()["results"] == []
    # capacity frees: the first in the queue gets it
    instance_delete(actor=None, instance=Instance.objects.get(pk=first["instance"]["id"]))
    finish(Operation.objects.get(target_id=first["instance"]["id"], kind="instance.delete").pk)
    out = queue_process()
    assert out == {"placed": 1, "expired": 0, "waiting": 1}, QueuedRequest.objects.values_list("reason", flat=True)
    assert finish(q1["operation"]["id"]).status == "succeeded"
    assert Instance.objects.get(pk=q1["instance"]["id"]).status == "active"
    cap = world.client_b.get(f"/api/v1/instances/{q2['instance']['id']}/capacity").json()
    assert cap["queued_request"]["position"] == 1
    # q2's timeout passes
    clock.move_to(at(8, 11, ))
    assert queue_process() == {"placed": 0, "expired": 1, "waiting": 0}
    op = finish(q2["operation"]["id"])
    assert (op.status, op.error_code) == ("failed", "queue_expired")
    inst = Instance.objects.get(pk=q2["instance"]["id"])
    assert (inst.status, inst.error_code) == ("error", "queue_expired")


def test_rw036_request_held_for_maintenance_with_the_reason(world, clock):
    h = gpu_host(gpus=1, nvswitch="")
    h.state = "maintenance"
    h.save(update_fields=["state"])
    body = _request(world, world.gpu1, "held", queue_timeout_s=4 * 3600)
    queue_process()
    q = QueuedRequest.objects.get(instance_id=body["instance"]["id"])
    assert q.status == "waiting" and "host maintenance (not available) (1 host)" in q.reason
    assert q.explanation["filters"][0]["reasons"] == {"maintenance": 1}
    h.state = "available"
    h.save(update_fields=["state"])
    assert queue_process()["placed"] == 1
    assert finish(body["operation"]["id"]).status == "succeeded"
    assert InstanceTerms.objects.get(instance_id=body["instance"]["id"]).market == "on_demand"


def test_an_instance_in_a_full_lease_does_not_spill_onto_other_capacity(world, clock):
    gpu_host(), gpu_host()
    le = _active_lease(world, clock, kind="gpus", count=1)
    first = _request(world, world.gpu1, "in-1", market="lease", lease=str(le.pk))
    assert finish(first["operation"]["id"]).status == "succeeded"
    r = world.client_a.post("/api/v1/instance-requests", {
        "project": str(world.project_a.pk), "name": "in-2", "flavor": str(world.gpu1.pk),
        "image": str(world.image.pk), "market": "lease", "lease": str(le.pk)}, format="json")
    # refused at the request (nothing inside a lease waits for capacity), nothing written
    assert (r.status_code, r.json()["code"], r.json()["lease"]) == (409, "capacity_unavailable", str(le.pk))
    assert not Instance.objects.filter(name="in-2").exists()
    assert Allocation.objects.exclude(consumer_id__in=[le.pk, first["instance"]["id"]]).count() == 0


def test_queued_on_demand_request_preempts_spot_after_the_grace_period(world, clock, settings):
    settings.RESERVATIONS_SPOT_GRACE_S = 60
    gpu_host(gpus=1, nvswitch="")
    spot = _request(world, world.gpu1, "spot", client=world.client_b, project=world.project_b, market="spot")
    assert finish(spot["operation"]["id"]).status == "succeeded"
    waiting = _request(world, world.gpu1, "od", queue_timeout_s=3600)
    assert queue_process()["waiting"] == 1
    terms = InstanceTerms.objects.get(instance_id=spot["instance"]["id"])
    assert terms.interruption_at == at(8, 1) and "On-demand work queued" in terms.interruption_reason
    queue_process()  # chosen once only
    assert InstanceTerms.objects.filter(interruption_at__isnull=False).count() == 1
    clock.move_to(at(8, 1))
    assert leases_advance()["preempted"] == 1
    finish(Operation.objects.get(target_id=spot["instance"]["id"], kind="instance.delete").pk)
    assert queue_process()["placed"] == 1
    assert finish(waiting["operation"]["id"]).status == "succeeded"


def test_project_priority_goes_first_in_the_queue(world, clock):
    gpu_host(gpus=1, nvswitch="")
    holder = _request(world, world.gpu1, "holder")
    finish(holder["operation"]["id"])
    low = _request(world, world.gpu1, "low", client=world.client_b, project=world.project_b, queue_timeout_s=3600)
    r = world.staff_client.post("/api/v1/queue-priorities", {"project": str(world.project_a.pk), "priority": 5},
                                format="json")
    assert r.status_code == 201
    assert world.client_a.post("/api/v1/queue-priorities", {"project": str(world.project_a.pk), "priority": 9},
                               format="json").status_code == 404
    unknown = world.staff_client.post("/api/v1/queue-priorities", {"project": str(uuid.uuid4()), "priority": 5},
                                      format="json")
    assert (unknown.status_code, unknown.json()["code"], unknown.json()["errors"]) == (
        400, "validation_error", {"project": ["Not found."]})
    high = _request(world, world.gpu1, "high", queue_timeout_s=3600)
    queue_process()
    positions = {q["instance"]: q["position"] for q in world.staff_client.get("/api/v1/queued-requests").json()[
        "results"]}
    assert (positions[high["instance"]["id"]], positions[low["instance"]["id"]]) == (1, 2)
    instance_delete(actor=None, instance=Instance.objects.get(pk=holder["instance"]["id"]))
    finish(Operation.objects.get(target_id=holder["instance"]["id"], kind="instance.delete").pk)
    assert queue_process()["placed"] == 1
    assert QueuedRequest.objects.get(instance_id=high["instance"]["id"]).status == "placed"


def test_extending_and_shrinking_a_lease_moves_its_instances_allocations(world, clock):
    gpu_host()
    le = _active_lease(world, clock, kind="gpus", count=2)
    body = _request(world, world.gpu1, "in-lease", market="lease", lease=str(le.pk))
    finish(body["operation"]["id"])
    child = Allocation.objects.get(consumer_id=body["instance"]["id"], resource_class="gpu")
    r = world.client_a.post(f"/api/v1/leases/{le.pk}/extend", {"end": "2026-03-01 14:00"}, format="json")
    assert r.status_code == 200
    child.refresh_from_db()
    assert child.period.upper == at(14)
    r = world.client_a.post(f"/api/v1/leases/{le.pk}/shrink", {"end": "2026-03-01 10:00"}, format="json")
    assert r.status_code == 200
    child.refresh_from_db()
    assert child.period.upper == at(10)


def test_fair_share_puts_the_organization_holding_fewer_gpus_first(world, clock):
    gpu_host(gpus=2, nvswitch="")
    for name in ("a1", "a2"):
        finish(_request(world, world.gpu1, name)["operation"]["id"])  # organization A holds 2 GPUs
    first = _request(world, world.gpu1, "a-queued", queue_timeout_s=3600)
    clock.move_to(at(8, 5))
    later = _request(world, world.gpu1, "b-queued", client=world.client_b, project=world.project_b,
                     queue_timeout_s=3600)
    from apps.reservations.services.queue import queue_positions

    pos = {str(QueuedRequest.objects.get(pk=k).instance_id): v for k, v in queue_positions().items()}
    assert (pos[later["instance"]["id"]], pos[first["instance"]["id"]]) == (1, 2)


def test_extend_and_shrink_move_every_allocation_of_the_lease_instances(world, clock):
    gpu_host()
    le = _active_lease(world, clock, kind="gpus", count=2)
    body = _request(world, world.gpu1, "in-lease", market="lease", lease=str(le.pk))
    finish(body["operation"]["id"])
    rows = Allocation.objects.filter(consumer_id=body["instance"]["id"])
    assert {r.resource_class for r in rows} >= {"gpu", "vcpu", "memory_mib"}
    assert {r.period.upper for r in rows} == {at(12)}
    r = world.client_a.post(f"/api/v1/leases/{le.pk}/extend", {"end": "2026-03-01 14:00"}, format="json")
    assert r.status_code == 200, r.content
    assert {(r.resource_class, r.period.upper) for r in rows.all()} == {(r.resource_class, at(14)) for r in rows}
    r = world.client_a.post(f"/api/v1/leases/{le.pk}/shrink", {"end": "2026-03-01 10:00"}, format="json")
    assert r.status_code == 200, r.content
    assert {r.period.upper for r in rows.all()} == {at(10)}


def test_an_instance_in_a_lease_is_not_billed_again_nor_a_placement_for_sla(world, clock):
    from apps.compute.billing import instance_placements, instance_usage

    host = gpu_host()
    le = _active_lease(world, clock, kind="gpus", count=2)
    body = _request(world, world.gpu1, "in-lease", market="lease", lease=str(le.pk))
    finish(body["operation"]["id"])
    inst = body["instance"]["id"]
    outside = _request(world, world.gpu1, "on-demand")
    finish(outside["operation"]["id"])
    world.client_a.post(f"/api/v1/leases/{le.pk}/extend", {"end": "2026-03-01 14:00"}, format="json")
    clock.move_to(at(15))
    usage = list(instance_usage(at(8), at(15)))
    assert inst not in {u.resource_id for u in usage}
    assert outside["instance"]["id"] in {u.resource_id for u in usage}  # the on-demand one still is
    assert inst not in {p.resource_id for p in instance_placements(host.id, None, at(8), at(15))}


def test_a_stopped_instance_in_a_lease_resizes_within_the_lease(world, clock):
    """A tenant stops an instance it launched inside its lease and resizes it to a bigger flavor with the same GPU
    spec: 202, the resize completes, and its GPU row stays nested under the lease's row on the same GPU, up to the
    lease's end (no top-level row beside the lease's, so the lease alone is billed for the GPU)."""
    from apps.compute.models import Flavor

    gpu_host()
    le = _active_lease(world, clock, kind="hosts", count=1)
    body = _request(world, world.gpu1, "in-lease", market="lease", lease=str(le.pk))
    assert finish(body["operation"]["id"]).status == "succeeded"
    inst_id = body["instance"]["id"]
    before = Allocation.objects.get(consumer_id=inst_id, resource_class="gpu", period__upper_inf=False)
    clock.move_to(at(10))
    stop = world.client_a.post(f"/api/v1/instances/{inst_id}/stop/", {"hard": True}, format="json")
    assert finish(stop.json()["operation"]["id"]).status == "succeeded"
    bigger = Flavor.objects.create(name="g1-big", vcpus=12, memory_mib=98304, gpu_form="gpu",
                                   gpu_model="H100-SXM5-80GB", gpu_count=1)
    clock.move_to(at(10, 5))
    r = world.client_a.post(f"/api/v1/instances/{inst_id}/resize/", {"flavor": str(bigger.pk)}, format="json")
    assert r.status_code == 202, r.content
    assert finish(r.json()["operation"]["id"]).status == "succeeded"
    inst = Instance.objects.get(pk=inst_id)
    assert (inst.status, inst.flavor_id) == ("stopped", bigger.pk)
    live = Allocation.objects.filter(consumer_id=inst_id, period__contains=at(10, 30))
    gpu = live.get(resource_class="gpu")
    assert (gpu.gpu_id, gpu.parent.consumer_id, gpu.period.lower, gpu.period.upper) == (
        before.gpu_id, le.pk, at(10, 5), at(12))
    assert sorted(live.values_list("resource_class", "amount")) == [("gpu", 1), ("memory_mib", 98304), ("vcpu", 12)]


def test_an_instance_stopped_at_its_lease_end_does_not_start_on_the_gpu_the_next_tenant_got(world, clock):
    """A lease instance stopped at the lease end holds no GPU: its GPU was scrubbed and placed for another tenant,
    so its start is refused (409 capacity_released) and nothing is started or queued."""
    host = gpu_host(gpus=1)
    le = _active_lease(world, clock, kind="gpus", count=1, end_action="stop")
    body = _request(world, world.gpu1, "in-lease", market="lease", lease=str(le.pk))
    assert finish(body["operation"]["id"]).status == "succeeded"
    inst = Instance.objects.get(pk=body["instance"]["id"])
    clock.move_to(at(12))
    assert leases_advance()["ended"] == 1
    stop = Operation.objects.filter(target_id=inst.pk).order_by("-created_at").first()
    assert finish(stop.pk).status == "succeeded"
    gpu = host.gpus.get()
    assert (Instance.objects.get(pk=inst.pk).status, gpu.scrub_state) == ("stopped", "clean")
    other = _request(world, world.gpu1, "b-1", client=world.client_b, project=world.project_b)
    assert finish(other["operation"]["id"]).status == "succeeded"
    assert Allocation.objects.filter(consumer_id=other["instance"]["id"], gpu=gpu, period__upper_inf=True).exists()

    ops = Operation.objects.count()
    r = world.client_a.post(f"/api/v1/instances/{inst.pk}/start/", format="json")
    assert (r.status_code, r.json()["code"]) == (409, "capacity_released"), r.content
    assert (Instance.objects.get(pk=inst.pk).status, Operation.objects.count()) == ("stopped", ops)


def test_a_cancelled_lease_s_gpu_is_dirty_until_the_agent_reset_it_and_only_then_another_tenant_s(world, clock):
    """Lease cancel (the lease-end release path): the running instance's GPU is dirty from the cancel (held while
    its VM still runs, the scrub queued by its delete), the other tenant's create is refused until the agent has
    reset it, then placed on it."""
    from gpucloud_agent.backends.fake import FakeBackend

    from apps.reservations.services.leases import lease_cancel
    from tests.compute.conftest import drive
    from tests.compute.test_scrub import Agent

    host = gpu_host(gpus=1)
    agent = Agent(host, [], FakeBackend())
    le = _active_lease(world, clock, kind="gpus", count=1, end_action="delete")
    body = _request(world, world.gpu1, "in-lease", market="lease", lease=str(le.pk))
    assert finish(body["operation"]["id"]).status == "succeeded"
    inst = Instance.objects.get(pk=body["instance"]["id"])
    lease_cancel(actor=None, lease=le)
    gpu = host.gpus.get()
    assert gpu.scrub_state == "dirty"
    delete = Operation.objects.get(target_id=inst.pk, kind="instance.delete")
    assert drive(delete.pk).status == "succeeded"
    gpu.refresh_from_db()
    (reset,) = AgentCommand.objects.filter(host=host, kind="reset_gpu")
    assert (gpu.scrub_state, gpu.scrub_commands, reset.status) == ("dirty", [str(reset.pk)], "queued")

    r = world.client_b.post("/api/v1/instances/", {"project": str(world.project_b.pk), "name": "b-1", "flavor": str(
        world.gpu1.pk), "image": str(world.image.pk)}, format="json")
    assert (r.status_code, r.json()["code"]) == (409, "capacity_unavailable"), r.content
    assert agent.run() == ["reset_gpu"]
    gpu.refresh_from_db()
    assert gpu.scrub_state == "clean"
    other = _request(world, world.gpu1, "b-1", client=world.client_b, project=world.project_b)
    assert finish(other["operation"]["id"]).status == "succeeded"
    assert Instance.objects.get(pk=other["instance"]["id"]).host_id == host.pk


def test_a_start_that_the_lease_end_overtakes_starts_nothing_and_scrubs_the_gpu(world, clock):
    """The lease ends between a start's request and its `start` step: the GPU is held dirty at the lease end (the
    VM may be coming up), the start fails with capacity_released before the domain starts, and its failure queues
    the scrub; the GPU is clean only after the agent's reset."""
    from apps.compute.services.instances import instance_start, instance_stop
    from tests.compute.conftest import drive

    host = gpu_host(gpus=1)
    le = _active_lease(world, clock, kind="gpus", count=1, end_action="stop")
    body = _request(world, world.gpu1, "in-lease", market="lease", lease=str(le.pk))
    assert finish(body["operation"]["id"]).status == "succeeded"
    inst = Instance.objects.get(pk=body["instance"]["id"])
    assert finish(instance_stop(actor=None, instance=inst).pk).status == "succeeded"
    inst.refresh_from_db()
    clock.move_to(at(11, 59))
    start = instance_start(actor=None, instance=inst)
    clock.move_to(at(12))
    assert leases_advance()["ended"] == 1
    gpu = host.gpus.get()
    assert (gpu.scrub_state, list(AgentCommand.objects.filter(host=host, kind="reset_gpu"))) == ("dirty", [])

    op = drive(start.pk)
    inst.refresh_from_db()
    assert (op.status, op.error_code, inst.status, inst.observed_state) == (
        "failed", "capacity_released", "error", "shutoff")
    (reset,) = AgentCommand.objects.filter(host=host, kind="reset_gpu")
    gpu.refresh_from_db()
    assert (gpu.scrub_state, gpu.scrub_commands, reset.status) == ("dirty", [str(reset.pk)], "queued")


def test_a_lease_end_during_a_reboot_holds_the_gpu_dirty_and_resets_it_only_once_the_vm_is_off(world, clock):
    """The lease ends while its instance reboots (stop is refused then): the VM keeps running on the GPU, so no
    reset is queued under it (a reset would fail, or clean a GPU a VM still uses); the GPU stays dirty until the
    instance's delete turns the VM off and queues the reset."""
    from apps.compute.services.instances import instance_reboot

    host = gpu_host(gpus=1)
    le = _active_lease(world, clock, kind="gpus", count=1, end_action="stop")
    body = _request(world, world.gpu1, "in-lease", market="lease", lease=str(le.pk))
    assert finish(body["operation"]["id"]).status == "succeeded"
    inst = Instance.objects.get(pk=body["instance"]["id"])
    clock.move_to(at(11, 59))
    reboot = instance_reboot(actor=None, instance=inst)
    clock.move_to(at(12))
    assert leases_advance()["ended"] == 1
    gpu = host.gpus.get()
    assert (gpu.scrub_state, AgentCommand.objects.filter(host=host).count()) == ("dirty", 0)
    assert finish(reboot.pk).status == "succeeded"
    gpu.refresh_from_db()
    assert (Instance.objects.get(pk=inst.pk).status, gpu.scrub_state) == ("active", "dirty")
    assert AgentCommand.objects.filter(host=host).count() == 0

    assert finish(instance_delete(actor=None, instance=inst).pk).status == "succeeded"
    (reset,) = AgentCommand.objects.filter(host=host, kind="reset_gpu")
    gpu.refresh_from_db()
    assert (reset.status, gpu.scrub_state) == ("succeeded", "clean")


def test_between_a_lease_s_end_and_the_next_tick_its_running_gpu_is_not_placed_for_another_tenant(world, clock):
    """A lease's rows end at its end, but its instances run until the beat tick stops them (up to 15 s later):
    another tenant's create in that gap finishes the lease first (its GPU held dirty) and is not placed on the GPU
    the lease's VM still runs on; it waits, and is placed there once the VM is off and the agent reset the GPU."""
    from tests.compute.conftest import drive

    host = gpu_host(gpus=1)
    le = _active_lease(world, clock, kind="gpus", count=1, end_action="stop")
    body = _request(world, world.gpu1, "in-lease", market="lease", lease=str(le.pk))
    assert finish(body["operation"]["id"]).status == "succeeded"
    inst = Instance.objects.get(pk=body["instance"]["id"])
    clock.move_to(at(12))  # the lease's end; no tick yet
    other = _request(world, world.gpu1, "b-1", client=world.client_b, project=world.project_b)
    drive(other["operation"]["id"])
    b = Instance.objects.get(pk=other["instance"]["id"])
    assert (b.status, b.host_id, Allocation.objects.filter(consumer_id=b.pk).exists()) == ("pending", None, False)
    # the lease's finish was part of the create's step, which waits (rolled back): the tick finishes it for good
    assert leases_advance()["ended"] == 1
    gpu = host.gpus.get()
    assert (gpu.scrub_state, Instance.objects.get(pk=inst.pk).status) == ("dirty", "stopping")

    stop = Operation.objects.get(target_id=inst.pk, kind="instance.stop")
    assert finish(stop.pk).status == "succeeded"  # the VM is off; the agent resets the GPU
    gpu.refresh_from_db()
    assert gpu.scrub_state == "clean"
    assert finish(other["operation"]["id"]).status == "succeeded"
    assert Instance.objects.get(pk=b.pk).host_id == host.pk
