"""Re-slicing guarded by the allocation ledger: a staff MIG layout, GPU instance create or destroy is refused
(409 `gpu_allocated`) while an allocation holds the GPU (or the slices), whatever holds it; the platform's own
steps (the restore after a reboot, the scrub) are not."""
import datetime as dt
import uuid

import pytest

from apps.core.clock import now
from apps.identity.models import StaffRole
from apps.inventory.models import AgentCommand, GpuInstance
from apps.scheduling.ledger import AllocationSpec, ConsumerRef, allocations_claim, allocations_release
from tests.scheduling import fleet
from tests.tenancy.helpers import client_for, make_user, token_for

from .helpers import make_host

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops():
    return client_for(token_for(make_user("ops@provider.test", staff_role=StaffRole.OPERATOR), staff=True))


def _command(ops, host, kind, **payload):
    return ops.post("/api/v1/agent-commands/", {"host": str(host.pk), "kind": kind, "payload": payload},
                    format="json")


def _mig_host():
    host = make_host("g1", gpus=2)
    for g in host.gpus.all():
        g.mode = "mig"
        g.save(update_fields=["mode"])
    gpu = host.gpus.get(index=0)
    GpuInstance.objects.create(gpu=gpu, profile_id=9, profile="3g.40gb", start=4, size=4)
    return host, gpu


def test_a_mig_layout_under_a_held_gpu_instance_is_refused_with_the_holders():
    host, gpu = _mig_host()
    ops = client_for(token_for(make_user("ops@provider.test", staff_role=StaffRole.OPERATOR), staff=True))
    consumer = uuid.uuid4()
    allocations_claim(consumer=ConsumerRef(consumer, "instance", fleet.project("a").id),
                      specs=[AllocationSpec(host.id, "mig", gpu_id=gpu.id, slices=(4, 8), profile="3g.40gb")])

    resp = _command(ops, host, "apply_mig_layout", gpu_index=0, layout=[{"profile": "7g.80gb"}])
    assert resp.status_code == 409, resp.content
    assert resp["Content-Type"].startswith("application/problem+json")
    body = resp.json()
    assert body["code"] == "gpu_allocated" and body["gpu_index"] == 0
    assert [(h["consumer_id"], h["resource_class"], h["slices"]) for h in body["holders"]] == [
        (str(consumer), "mig", [4, 8])]
    # the same layout as recorded is a change too (the agent re-creates what differs): refused while held
    assert _command(ops, host, "apply_mig_layout", gpu_index=0,
                    layout=[{"profile": "3g.40gb", "start": 4}]).status_code == 409
    # the held GPU instance cannot be destroyed; a GPU instance beside it, on free slices, can be made
    assert _command(ops, host, "destroy_gpu_instance", gpu_index=0, start=4).json()["code"] == "gpu_allocated"
    ok = _command(ops, host, "create_gpu_instance", gpu_index=0, profile="3g.40gb", start=0)
    assert ok.status_code == 201, ok.content
    # the other GPU is free
    assert _command(ops, host, "apply_mig_layout", gpu_index=1, layout=[{"profile": "7g.80gb"}]).status_code == 201
    assert list(AgentCommand.objects.filter(host=host).values_list("kind", "payload__gpu_index")) == [
        ("create_gpu_instance", 0), ("apply_mig_layout", 1)]

    allocations_release(consumer_id=consumer)
    assert _command(ops, host, "apply_mig_layout", gpu_index=0, layout=[{"profile": "7g.80gb"}]).status_code == 201


def test_a_whole_gpu_held_or_leased_later_refuses_a_mode_change(ops):
    host = make_host("g2", gpus=2)
    g0, g1 = host.gpus.order_by("index")
    project = fleet.project("a")
    allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", project.id),
                      specs=[AllocationSpec(host.id, "gpu", gpu_id=g0.id)])
    start = now() + dt.timedelta(days=2)
    allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "lease", project.id),
                      specs=[AllocationSpec(host.id, "gpu", gpu_id=g1.id)], start=start,
                      end=start + dt.timedelta(days=1))
    for index in (0, 1):  # exclusive -> MIG under running work, or under a lease that starts in two days
        resp = _command(ops, host, "apply_mig_layout", gpu_index=index, layout=[{"profile": "7g.80gb"}])
        assert resp.status_code == 409 and resp.json()["code"] == "gpu_allocated", resp.content
    assert resp.json()["holders"][0]["consumer_type"] == "lease"
    assert not AgentCommand.objects.exists()


def test_the_platforms_own_restore_and_scrub_pass_the_guard():
    """The restore of a recorded layout after a reboot and the scrub's destroy run while the ledger still holds
    the slices (the scrub is queued before the release): they are the platform's, not a re-slice."""
    from apps.inventory.services.agent import host_inventory_sync
    from apps.inventory.services.scrub import gpus_scrub

    host, gpu = _mig_host()
    allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", fleet.project("a").id),
                      specs=[AllocationSpec(host.id, "mig", gpu_id=gpu.id, slices=(4, 8), profile="3g.40gb")])
    host_inventory_sync(host=host, inventory={"gpus": [
        {"index": 0, "uuid": gpu.uuid, "model": gpu.model, "mig": {"enabled": True, "layout": []}}]})
    gpus_scrub(actor=None, host=host, gpu_indexes={0}, gpu_instances=[(0, 4)], partitions=[], vfs=[],
               reason="test")
    assert sorted(AgentCommand.objects.filter(host=host).values_list("kind", flat=True)) == [
        "apply_mig_layout", "destroy_gpu_instance"]


def _report(host, cmd, succeeded=True, result=None, error=""):
    from apps.inventory.models import AgentCredential
    from apps.inventory.services.agent import agent_command_report

    cred = AgentCredential.objects.filter(host=host).first() or AgentCredential.objects.create(
        host=host, prefix=f"t{host.pk.hex[:12]}", secret_hash="x")
    agent_command_report(credential=cred, command_id=cmd.pk, succeeded=succeeded, result=result or {}, error=error)
    cmd.refresh_from_db()
    return cmd


def test_an_apply_is_asserted_against_the_layout_read_back_and_the_previous_one_restored(ops):
    host, gpu = _mig_host()  # recorded: 3g.40gb at slice 4
    cmd = AgentCommand.objects.get(pk=_command(ops, host, "apply_mig_layout", gpu_index=0,
                                               layout=[{"profile": "7g.80gb"}]).json()["id"])
    # the agent says it succeeded but reads back another layout: not a success, the record keeps the old layout
    cmd = _report(host, cmd, result={"layout": [{"profile_id": 9, "start": 0, "size": 4, "gi_id": 3}]})
    assert (cmd.status, cmd.result["code"]) == ("failed", "mig_layout_mismatch")
    assert "reads back [9@0], not [0@0]" in cmd.error
    assert list(GpuInstance.objects.filter(gpu=gpu).values_list("profile", "start")) == [("3g.40gb", 4)]
    gpu.refresh_from_db()
    assert gpu.observed["mig_restore_pending"] is True and gpu.mode == "mig"
    (restore,) = AgentCommand.objects.filter(host=host, status="queued")
    assert (restore.kind, [(i["profile_id"], i["start"]) for i in restore.payload["layout"]]) == (
        "apply_mig_layout", [(9, 4)])
    # a success without a read-back is not verified either
    assert _report(host, restore, result={}).status == "failed"


def test_a_failed_apply_rolled_back_by_the_agent_changes_nothing(ops):
    host, gpu = _mig_host()
    cmd = AgentCommand.objects.get(pk=_command(ops, host, "apply_mig_layout", gpu_index=0,
                                               layout=[{"profile": "7g.80gb"}]).json()["id"])
    _report(host, cmd, succeeded=False, error="Insufficient Resources", result={
        "code": "NVML_ERROR_INSUFFICIENT_RESOURCES", "rolled_back": True,
        "layout": [{"profile_id": 9, "start": 4, "size": 4, "gi_id": 1}]})
    assert list(GpuInstance.objects.filter(gpu=gpu).values_list("profile", "start")) == [("3g.40gb", 4)]
    assert not AgentCommand.objects.filter(host=host, status="queued").exists()
    # a rollback that did not happen: the previous layout is queued again
    cmd2 = AgentCommand.objects.get(pk=_command(ops, host, "apply_mig_layout", gpu_index=0,
                                                layout=[{"profile": "7g.80gb"}]).json()["id"])
    _report(host, cmd2, succeeded=False, error="rollback failed", result={"code": "x", "rolled_back": False,
                                                                          "layout": []})
    assert AgentCommand.objects.filter(host=host, status="queued", kind="apply_mig_layout").count() == 1


def test_a_fleet_import_that_changes_a_held_gpus_mode_is_refused(ops):
    import yaml

    from apps.inventory.models import Gpu
    from tests.inventory.test_api import SAMPLE

    assert ops.post("/api/v1/fleet/import/", {"document": SAMPLE, "dry_run": False}, format="json").status_code == 200
    doc = yaml.safe_load(ops.get("/api/v1/fleet/export/").json()["document"])
    host_doc = next(h for h in doc["hosts"] if h.get("gpus"))
    gpu = Gpu.objects.get(host__name=host_doc["name"], index=host_doc["gpus"][0]["index"])
    allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", fleet.project("a").id),
                      specs=[AllocationSpec(gpu.host_id, "gpu", gpu_id=gpu.id)])
    host_doc["gpus"][0]["mode"] = "mig"
    changed = yaml.safe_dump(doc, sort_keys=False)
    resp = ops.post("/api/v1/fleet/import/", {"document": changed, "dry_run": False}, format="json")
    assert resp.status_code == 409 and resp.json()["code"] == "gpu_allocated", resp.content
    gpu.refresh_from_db()
    assert gpu.mode == "exclusive"
    host_doc["gpus"][0]["mode"] = "exclusive"
    host_doc["gpus"][1]["mode"] = "mig"  # a GPU nobody holds may change
    resp = ops.post("/api/v1/fleet/import/", {"document": yaml.safe_dump(doc, sort_keys=False), "dry_run": False},
                    format="json")
    assert resp.status_code == 200 and resp.json()["applied"], resp.content


def test_the_drift_reconciler_compares_the_ledger_with_the_agents_report():
    from apps.audit.models import AuditEvent
    from apps.core import clock
    from apps.inventory.models import Gpu
    from apps.inventory.services.agent import host_inventory_sync
    from apps.inventory.services.mig_drift import DRIFT_GRACE, mig_drift_reconcile
    from gpucloud.celery import collect_beat_schedule

    host, gpu = _mig_host()  # recorded: 3g.40gb at slice 4
    project = fleet.project("a")
    held, other = uuid.uuid4(), uuid.uuid4()
    past = now() - DRIFT_GRACE - dt.timedelta(minutes=1)
    allocations_claim(consumer=ConsumerRef(held, "instance", project.id), start=past,
                      specs=[AllocationSpec(host.id, "mig", gpu_id=gpu.id, slices=(4, 8), profile="3g.40gb")])
    allocations_claim(consumer=ConsumerRef(other, "instance", project.id), start=past,
                      specs=[AllocationSpec(host.id, "mig", gpu_id=gpu.id, slices=(0, 2), profile="2g.20gb")])

    def report(layout):
        host_inventory_sync(host=host, inventory={"gpus": [{"index": 0, "uuid": gpu.uuid, "model": gpu.model,
                                                            "mig": {"enabled": True, "layout": layout}}]})

    # the host has the 3g.40gb and, made by hand, a 1g.10gb on slice 0 where the ledger holds a 2g.20gb
    report([{"profile_id": 9, "start": 4, "size": 4}, {"profile_id": 19, "start": 0, "size": 1}])
    assert mig_drift_reconcile() == {"gpus": 1, "drifting": 1, "changed": 1}
    drift = Gpu.objects.get(pk=gpu.pk).observed["mig_drift"]
    assert [(d["code"], d.get("consumer_id"), d.get("reported")) for d in drift] == [
        ("instance_differs", str(other), ["1g.10gb@0"]), ("instance_unrecorded", None, None)]
    assert AuditEvent.objects.filter(action="inventory.gpu.mig_drift").count() == 1
    # an unchanged picture records nothing new, and the next inventory report keeps the drift
    report([{"profile_id": 9, "start": 4, "size": 4}, {"profile_id": 19, "start": 0, "size": 1}])
    assert Gpu.objects.get(pk=gpu.pk).observed["mig_drift"] == drift
    assert mig_drift_reconcile()["changed"] == 0

    # after a reboot the host has nothing: both allocations miss their GPU instance
    report([])
    mig_drift_reconcile()
    assert [(d["code"], d["slices"]) for d in Gpu.objects.get(pk=gpu.pk).observed["mig_drift"]] == [
        ("instance_missing", [0, 2]), ("instance_missing", [4, 8])]
    # the ledger releases the 2g.20gb and the host has the 3g.40gb again: no drift, and that is audited too
    allocations_release(consumer_id=other)
    report([{"profile_id": 9, "start": 4, "size": 4}])
    assert mig_drift_reconcile() == {"gpus": 1, "drifting": 0, "changed": 1}
    assert Gpu.objects.get(pk=gpu.pk).observed["mig_drift"] == []
    assert AuditEvent.objects.filter(action="inventory.gpu.mig_drift").count() == 3
    # a fresh claim gets its grace period; the reconciler runs from beat
    allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", project.id), start=clock.now(),
                      specs=[AllocationSpec(host.id, "mig", gpu_id=gpu.id, slices=(0, 4), profile="3g.40gb")])
    assert mig_drift_reconcile()["drifting"] == 0
    assert collect_beat_schedule()["inventory-mig-drift-reconcile"]["task"] == "inventory.mig_drift_reconcile_task"


def test_a_staff_reset_or_partition_deactivation_under_a_tenant_is_refused(ops):
    host = make_host("g3", gpus=8, nvswitch_system="hgx-h100-8gpu", active_partitions=[1])
    g2 = host.gpus.get(index=2)
    consumer = uuid.uuid4()
    allocations_claim(consumer=ConsumerRef(consumer, "instance", fleet.project("a").id),
                      specs=[AllocationSpec(host.id, "gpu", gpu_id=g2.id)])
    reset = _command(ops, host, "reset_gpu", gpu_index=2)
    assert (reset.status_code, reset.json()["code"], reset.json()["gpu_index"]) == (409, "gpu_allocated", 2)
    assert _command(ops, host, "reset_gpu", gpu_index=3).status_code == 201
    # partition 1 is all eight GPUs: its NVLink is the tenant's GPU 2's too
    deactivate = _command(ops, host, "deactivate_partition", partition_id=1)
    assert (deactivate.status_code, deactivate.json()["code"]) == (409, "gpu_allocated"), deactivate.content
    allocations_release(consumer_id=consumer)
    assert _command(ops, host, "deactivate_partition", partition_id=1).status_code == 201


def test_a_staff_partition_activation_over_a_tenants_gpu_is_refused(ops):
    """Activating an NVSwitch partition resets its GPUs in Fabric Manager and joins their NVLink to the other GPUs
    of the partition: over a running tenant's GPU it takes the device from the VM and links it to GPUs other
    projects get next. Refused like the deactivation; the platform's own activation of its claim passes."""
    from apps.inventory.services.agent import agent_command_enqueue

    host = make_host("g4", gpus=8, nvswitch_system="hgx-h100-8gpu", active_partitions=[])
    g2 = host.gpus.get(index=2)
    consumer = uuid.uuid4()
    allocations_claim(consumer=ConsumerRef(consumer, "instance", fleet.project("a").id),
                      specs=[AllocationSpec(host.id, "gpu", gpu_id=g2.id)])
    activate = _command(ops, host, "activate_partition", partition_id=1)  # all eight GPUs, the tenant's GPU 2 too
    assert (activate.status_code, activate.json()["code"], activate.json()["gpu_index"]) == (
        409, "gpu_allocated", 2), activate.content
    assert not AgentCommand.objects.filter(host=host).exists()
    agent_command_enqueue(actor=None, host=host, kind="activate_partition", payload={"partition_id": 1},
                          ledger_guard=False)  # compute activating the partition its own claim placed
    allocations_release(consumer_id=consumer)
    assert _command(ops, host, "activate_partition", partition_id=1).status_code == 201


def test_a_failed_restore_is_not_queued_again_at_once(ops):
    """A restore of the recorded layout that fails is left to the next inventory report (which queues it again):
    re-queuing it on its own failure would loop while the device keeps refusing."""
    from apps.inventory.services.agent import host_inventory_sync

    host, gpu = _mig_host()
    host_inventory_sync(host=host, inventory={"gpus": [
        {"index": 0, "uuid": gpu.uuid, "model": gpu.model, "mig": {"enabled": True, "layout": []}}]})
    (restore,) = AgentCommand.objects.filter(host=host, status="queued")
    _report(host, restore, succeeded=False, error="Insufficient Resources",
            result={"code": "NVML_ERROR_INSUFFICIENT_RESOURCES", "rolled_back": True, "layout": []})
    assert not AgentCommand.objects.filter(host=host, status="queued").exists()
    gpu.refresh_from_db()
    assert gpu.observed["mig_restore_pending"] is True
    host_inventory_sync(host=host, inventory={"gpus": [
        {"index": 0, "uuid": gpu.uuid, "model": gpu.model, "mig": {"enabled": True, "layout": []}}]})
    assert AgentCommand.objects.filter(host=host, status="queued", kind="apply_mig_layout").count() == 1


def test_a_lease_that_starts_later_does_not_block_a_reset(ops):
    """A reset or a partition deactivation harms only running work; a re-slice also what is sold for later."""
    host = make_host("g4", gpus=1)
    gpu = host.gpus.get()
    start = now() + dt.timedelta(days=1)
    allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "lease", fleet.project("a").id),
                      specs=[AllocationSpec(host.id, "gpu", gpu_id=gpu.id)], start=start,
                      end=start + dt.timedelta(days=1))
    assert _command(ops, host, "reset_gpu", gpu_index=0).status_code == 201
    assert _command(ops, host, "apply_mig_layout", gpu_index=0, layout=[{"profile": "7g.80gb"}]).status_code == 409
