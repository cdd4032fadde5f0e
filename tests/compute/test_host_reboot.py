"""After a host reboots (docs/compute.md "After a host reboots", ADR 0509): the agent reports a new boot id, the
control plane has it restore the VFs and passthrough bindings and the recorded MIG layout, and each VM made before
the reboot is started again (it was running), left stopped (the tenant had stopped it) or put in `error` naming
the device that did not come back, its allocation kept. Here the real agent executor on its `fake` backend (whose
reboot forgets GPU instances, VFs, vGPU types and bindings) through the real command queue and reconciler."""
from __future__ import annotations

import pytest
from gpucloud_agent.backends.fake import FakeBackend

from apps.compute.models import Instance
from apps.compute.services.hypervisor import driver_for_host
from apps.compute.services.reconcile import instances_reconcile
from apps.inventory.models import AgentCommand, Host, VirtualFunction
from apps.inventory.services.agent import host_inventory_sync
from apps.operations.models import Operation

from .conftest import drive, gpu_host
from .test_instance_lifecycle import _live_allocations
from .test_scrub import Agent, _create, timeline  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db


def _report(host, gpu, backend, boot_id):
    """The agent's inventory report: its boot, GPU 0's MIG mode and GPU instances and the VFs the kernel has."""
    g = backend.gpus()[0]
    host_inventory_sync(host=host, inventory={
        "host": {"boot_id": boot_id, "booted_at": backend.booted_at()},
        "gpus": [{"index": 0, "uuid": gpu.uuid, "model": gpu.model, "pci_address": gpu.pci_address,
                  "mig": {"enabled": g.mig["enabled"], "layout": g.mig["layout"]}, "vfs": g.vfs}]})


def _mig_vm(world, name="m-1"):
    """An active MIG `3g.40gb` VM on a Hopper host (MIG-backed vGPU on a VF), made through the agent, the host's
    boot reported: (instance, host, gpu, backend, agent)."""
    host = gpu_host(gpus=1, mode="mig")
    gpu = host.gpus.get()
    backend = FakeBackend(vfs_per_gpu=2)
    gpu.pci_address = backend.gpus()[0].pci_address
    gpu.save(update_fields=["pci_address"])
    VirtualFunction.objects.bulk_create([VirtualFunction(gpu=gpu, index=v["index"], pci_address=v["pci_address"])
                                         for v in backend.gpus()[0].vfs])
    backend.set_mig_mode(0, True)
    agent = Agent(host, [], backend)
    resp = _create(world, world.client_a, world.project_a, world.mig, name)
    drive(resp.data["operation"]["id"])
    assert agent.run() == ["create_gpu_instance", "set_vf_vgpu_type"]
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    _report(host, gpu, backend, backend.boot_id())
    return Instance.objects.get(pk=resp.data["instance"]["id"]), host, gpu, backend, agent


def _reboot(host, gpu, backend, *instances):
    for inst in instances:
        driver_for_host(host).domain_stop(inst.pk, hard=True)  # the reboot took the VMs down
    backend.reboot_host()
    _report(host, gpu, backend, backend.boot_id())  # the agent's first cycle after the boot


def test_a_running_vm_comes_back_running_with_its_vf_gpu_instance_and_type(world):
    inst, host, gpu, backend, agent = _mig_vm(world)
    _reboot(host, gpu, backend, inst)
    assert backend.gpus()[0].vfs == [] and VirtualFunction.objects.filter(gpu=gpu).count() == 2  # kept
    assert instances_reconcile().after_reboot["waiting"] == 1  # the restore is queued, not yet done
    (restore,) = AgentCommand.objects.filter(host=host, kind="restore_devices")
    assert restore.payload["sriov"] == [{"pci_address": gpu.pci_address, "num_vfs": 2}]
    assert agent.run() == ["apply_mig_layout", "restore_devices"]
    assert instances_reconcile().after_reboot["started"] == 1
    inst.refresh_from_db()
    assert inst.status == "starting" and inst.devices["reboot"]["outcome"] == "started"
    start = Operation.objects.filter(target_id=inst.pk, kind__endswith="start").latest("created_at")
    drive(start.pk)
    assert agent.run() == ["set_vf_vgpu_type"]
    assert drive(start.pk).status == "succeeded"
    assert world.client_a.get(f"/api/v1/instances/{inst.pk}/").json()["status"] == "active"
    assert len(backend.gpus()[0].vfs) == 2 and len(backend.gpu_instances(0)) == 1
    assert backend.state["vf_types"] == {inst.devices["vfs"][0]["address"]: "H100XM-3-40C"}
    assert instances_reconcile().after_reboot == {"started": 0, "stopped": 0, "error": 0, "waiting": 0}


def test_a_vm_whose_gpu_did_not_come_back_goes_to_error_naming_it_and_keeps_its_allocation(world):
    inst, host, gpu, backend, agent = _mig_vm(world)
    backend.state["lost"] = [gpu.pci_address]
    _reboot(host, gpu, backend, inst)
    instances_reconcile()
    assert agent.run() == ["apply_mig_layout", "restore_devices"]
    assert instances_reconcile().after_reboot["error"] == 1
    body = world.client_a.get(f"/api/v1/instances/{inst.pk}/").json()
    assert (body["status"], body["error_code"]) == ("error", "device_missing"), body
    assert gpu.pci_address in body["error_reason"] and "did not come back" in body["error_reason"]
    assert ("mig", 1) in _live_allocations(inst.pk)  # kept until the tenant acts
    from apps.health.models import HealthEvent

    (event,) = HealthEvent.objects.filter(host=host, kind="device_op_failed")
    assert (event.gpu_id, event.source) == (gpu.pk, "control_plane") and gpu.pci_address in event.message


def test_a_vm_the_tenant_had_stopped_stays_stopped(world):
    inst, host, gpu, backend, agent = _mig_vm(world)
    stop = world.client_a.post(f"/api/v1/instances/{inst.pk}/stop/", {"hard": True}, format="json")
    assert drive(stop.data["operation"]["id"]).status == "succeeded"
    _reboot(host, gpu, backend)
    instances_reconcile()
    assert agent.run() == ["apply_mig_layout", "restore_devices"]
    assert instances_reconcile().after_reboot["stopped"] == 1
    inst.refresh_from_db()
    assert inst.status == "stopped" and inst.devices["reboot"]["outcome"] == "stopped"
    start = world.client_a.post(f"/api/v1/instances/{inst.pk}/start/")  # the tenant's start brings it back
    drive(start.data["operation"]["id"])
    assert agent.run() == ["set_vf_vgpu_type"]
    assert drive(start.data["operation"]["id"]).status == "succeeded"


def test_a_host_without_vms_gets_its_vfs_back(world):
    inst, host, gpu, backend, agent = _mig_vm(world)
    delete = world.client_a.delete(f"/api/v1/instances/{inst.pk}/")
    drive(delete.data["operation"]["id"])
    agent.run()  # the scrub
    _reboot(host, gpu, backend)
    instances_reconcile()
    assert agent.run() == ["restore_devices"]
    _report(host, gpu, backend, backend.boot_id())
    assert len(backend.gpus()[0].vfs) == 2 and VirtualFunction.objects.filter(gpu=gpu).count() == 2
    host.refresh_from_db()
    assert host.observed["reboot"]["missing"] == [] and "restored_at" in host.observed["reboot"]


def test_a_passthrough_gpu_is_bound_to_vfio_again_and_a_lost_one_errors_its_vm(world, timeline):  # noqa: F811
    """Two whole-GPU VMs on an exclusive-mode host: both GPUs are in the restore's vfio list; the one whose GPU
    did not come back goes to `error` naming it, the other is started again."""
    host = gpu_host(gpus=2)
    backend = FakeBackend()
    gpus = list(host.gpus.order_by("index"))
    for g, info in zip(gpus, backend.gpus()[:2], strict=True):
        g.pci_address = info.pci_address
        g.save(update_fields=["pci_address"])
    agent = Agent(host, timeline, backend)
    made = []
    for name in ("p-1", "p-2"):
        resp = _create(world, world.client_a, world.project_a, world.gpu1, name)
        assert drive(resp.data["operation"]["id"]).status == "succeeded"
        made.append(Instance.objects.get(pk=resp.data["instance"]["id"]))

    def report(boot_id):
        host_inventory_sync(host=host, inventory={"host": {"boot_id": boot_id, "booted_at": backend.booted_at()},
                                                  "gpus": [{"index": g.index, "uuid": g.uuid, "model": g.model,
                                                            "pci_address": g.pci_address} for g in gpus]})

    report(backend.boot_id())
    lost = made[1].devices["pci"][0]
    backend.state["lost"] = [lost]
    for inst in made:
        driver_for_host(host).domain_stop(inst.pk, hard=True)
    backend.reboot_host()
    report(backend.boot_id())
    instances_reconcile()
    (restore,) = AgentCommand.objects.filter(host=host, kind="restore_devices")
    assert sorted(v["pci_address"] for v in restore.payload["vfio"]) == sorted(g.pci_address for g in gpus)
    assert agent.run() == ["restore_devices"]
    assert instances_reconcile().after_reboot["started"] == 1
    kept, errored = (Instance.objects.get(pk=i.pk) for i in made)
    assert (errored.status, errored.error_code) == ("error", "device_missing") and lost in errored.error_reason
    assert ("gpu", 1) in _live_allocations(errored.pk)
    assert backend.state["vfio"] == [kept.devices["pci"][0]]
    start = Operation.objects.filter(target_id=kept.pk, kind__endswith="start").latest("created_at")
    assert drive(start.pk).status == "succeeded"
    assert world.client_a.get(f"/api/v1/instances/{kept.pk}/").json()["status"] == "active"


def test_an_hca_ports_vfs_are_kept_through_the_reboot_and_enabled_again(world):
    """The kernel lists no VFs on a freshly booted HCA (`sriov_numvfs` is 0); the recorded ones stay until the
    restore enabled them again, and the restore asks for as many on the port's physical function."""
    from apps.inventory.models import HcaPort
    from tests.scheduling import fleet

    host = gpu_host(gpus=1)
    su, leaves = fleet.su_with_leaves("su-reboot", rails=1)
    fleet.cable(host, leaves, vfs=2)
    port = HcaPort.objects.get(host=host)

    def report(boot_id: str, vfs: list[dict]) -> None:
        host_inventory_sync(host=host, inventory={
            "host": {"boot_id": boot_id},
            "hca_ports": [{"device": port.device, "port_number": port.port_number, "port_guid": port.port_guid,
                           "pci_address": port.pci_address, "vfs": vfs}]})

    before = [{"index": vf.index, "pci_address": vf.pci_address} for vf in port.virtual_functions.order_by("index")]
    report("boot-1", before)
    report("boot-2", [])  # the first report after the reboot
    assert VirtualFunction.objects.filter(hca_port=port).count() == 2
    instances_reconcile()
    restore = AgentCommand.objects.get(host=host, kind="restore_devices")
    assert {"pci_address": port.pci_address, "num_vfs": 2} in restore.payload["sriov"]


def test_a_settled_reboot_is_marked_and_the_host_not_read_again_until_its_next_reboot(world):
    from apps.compute.services.host_reboot import hosts_rebooted_reconcile

    inst, host, gpu, backend, agent = _mig_vm(world)
    _reboot(host, gpu, backend, inst)
    instances_reconcile()
    agent.run()
    assert instances_reconcile().after_reboot["started"] == 1
    start = Operation.objects.filter(target_id=inst.pk, kind__endswith="start").latest("created_at")
    drive(start.pk)
    agent.run()
    assert drive(start.pk).status == "succeeded"
    instances_reconcile()  # nothing left to settle: the record is marked
    host.refresh_from_db()
    assert "settled_at" in host.observed["reboot"]
    assert not Host.objects.filter(observed__has_key="reboot").exclude(
        observed__reboot__has_key="settled_at").exists()  # the reconciler's query finds no host to read
    before = host.observed["reboot"]["boot_id"]
    _reboot(host, gpu, backend, inst)  # the next reboot is a new record, read again
    host.refresh_from_db()
    assert host.observed["reboot"]["boot_id"] != before and "settled_at" not in host.observed["reboot"]
    assert hosts_rebooted_reconcile()["waiting"] == 1
