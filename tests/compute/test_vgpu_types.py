"""vGPU types on SR-IOV VFs (Ada, Hopper and later; NVIDIA's vendor VFIO): the node agent gives the instance's VF
its vGPU type before the VM is defined and the scrub clears it on release (here the real agent executor on its
`fake` backend, holding the VFs a host reports as `manage.py demo_agents` does, through the real command queue)."""
from __future__ import annotations

import pytest
from gpucloud_agent.backends.fake import FakeBackend

from apps.compute.demo import FLAVORS
from apps.compute.models import Flavor, Instance
from apps.compute.services.hypervisor import driver_for_host
from apps.inventory.models import VirtualFunction

from .conftest import drive, gpu_host
from .test_scrub import Agent, _create, timeline  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db


def _l40s_host(vfs: int = 2):
    """An L40S host in vGPU mode with `vfs` SR-IOV VFs per GPU, reported and known to the agent's fake driver, and
    the demo fleet's `l40s-vgpu-4q` flavor: (flavor, host, backend)."""
    flavor = Flavor.objects.create(**next(f for f in FLAVORS if f["name"] == "l40s-vgpu-4q"))
    host = gpu_host(gpus=1, model="L40S", mode="vgpu")
    gpu = host.gpus.get()
    VirtualFunction.objects.bulk_create([VirtualFunction(gpu=gpu, index=i, pci_address=f"0000:00:01.{i}")
                                         for i in range(vfs)])
    backend = FakeBackend()
    backend.state["vfs"] = [f"0000:00:01.{i}" for i in range(vfs)]
    return flavor, host, backend


def test_the_vf_gets_its_vgpu_type_before_the_vm_and_loses_it_on_release(world, timeline):  # noqa: F811
    flavor, host, backend = _l40s_host()
    agent = Agent(host, timeline, backend)
    resp = _create(world, world.client_a, world.project_a, flavor, "v-1")
    assert resp.status_code == 202, resp.data
    op = drive(resp.data["operation"]["id"])
    assert (op.status, op.step) == ("running", "wait_devices")  # not defined before the VF has its type
    assert timeline == []
    assert agent.run() == ["set_vf_vgpu_type"]
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    inst = Instance.objects.get(pk=resp.data["instance"]["id"])
    (vf,) = inst.devices["vfs"]
    assert inst.status == "active" and vf["vgpu_type"] == "L40S-4Q"
    assert backend.state["vf_types"] == {vf["address"]: "L40S-4Q"}
    spec = driver_for_host(host).host.specs[inst.pk]
    assert [(d.address, d.is_vf, d.vgpu_type) for d in spec.hostdevs] == [(vf["address"], True, "L40S-4Q")]
    assert timeline[0] == ("set_vf_vgpu_type", 0) and timeline[1][0] == "define"

    delete = world.client_a.delete(f"/api/v1/instances/{inst.pk}/")
    drive(delete.data["operation"]["id"])
    assert agent.run() == ["reset_vf"]
    assert drive(delete.data["operation"]["id"]).status == "succeeded"
    assert backend.state["vf_types"] == {}  # cleared: the next tenant's VF starts without a type


def test_a_vf_left_with_another_type_fails_the_create_and_is_scrubbed(world, timeline):  # noqa: F811
    """The driver refuses a type on a VF that has one (a leftover): the create fails instead of handing the VM a
    VF of the wrong type, and its failed-create scrub resets the VF."""
    flavor, host, backend = _l40s_host(vfs=1)
    backend.state["vf_types"] = {"0000:00:01.0": "L40S-8Q"}
    agent = Agent(host, timeline, backend)
    resp = _create(world, world.client_a, world.project_a, flavor, "v-1")
    drive(resp.data["operation"]["id"])
    assert agent.run() == ["set_vf_vgpu_type"]
    op = drive(resp.data["operation"]["id"])
    inst = Instance.objects.get(pk=resp.data["instance"]["id"])
    assert (op.status, op.error_code, inst.status) == ("failed", "agent_command_failed", "error"), op.error_detail
    assert "has vGPU type L40S-8Q" in op.error_detail
    assert not any(t[0] == "define" for t in timeline)
    assert agent.run() == ["reset_vf"]
    assert backend.state["vf_types"] == {}
    assert host.gpus.get().scrub_state == "clean"


def _hopper_mig(world, timeline):  # noqa: F811
    """An active MIG `3g.40gb` VM on a Hopper host (its MIG-backed vGPU on a VF), made through the agent:
    (instance, host, gpu, backend, agent)."""
    host = gpu_host(gpus=1, mode="mig")
    gpu = host.gpus.get()
    backend = FakeBackend(vfs_per_gpu=2)
    VirtualFunction.objects.bulk_create([VirtualFunction(gpu=gpu, index=v["index"], pci_address=v["pci_address"])
                                         for v in backend.gpus()[0].vfs])
    backend.set_mig_mode(0, True)
    agent = Agent(host, timeline, backend)
    resp = _create(world, world.client_a, world.project_a, world.mig, "m-1")
    drive(resp.data["operation"]["id"])
    assert agent.run() == ["create_gpu_instance", "set_vf_vgpu_type"]
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    return Instance.objects.get(pk=resp.data["instance"]["id"]), host, gpu, backend, agent


def _stop_and_reboot(world, inst, host, gpu, backend):
    from apps.inventory.services.agent import host_inventory_sync

    stop = world.client_a.post(f"/api/v1/instances/{inst.pk}/stop/", {"hard": True}, format="json")
    assert drive(stop.data["operation"]["id"]).status == "succeeded"
    backend.state["gis"]["0"], backend.state["vf_types"] = [], {}  # the host rebooted: both are gone
    host_inventory_sync(host=host, inventory={"gpus": [{"index": 0, "uuid": gpu.uuid, "model": gpu.model,
                                                        "mig": {"enabled": True, "layout": []}}]})


def test_a_start_after_a_reboot_waits_for_the_mig_restore_and_sets_the_vfs_type_again(world, timeline):  # noqa: F811
    inst, host, gpu, backend, agent = _hopper_mig(world, timeline)
    _stop_and_reboot(world, inst, host, gpu, backend)
    start = world.client_a.post(f"/api/v1/instances/{inst.pk}/start/")
    op = drive(start.data["operation"]["id"])
    assert (op.status, op.step) == ("running", "wait_devices")  # not started without its GPU instance and type
    assert agent.run() == ["apply_mig_layout", "set_vf_vgpu_type"]  # the recorded layout, then the VF's type
    assert drive(start.data["operation"]["id"]).status == "succeeded"
    inst.refresh_from_db()
    assert inst.status == "active"
    assert [(g.profile_id, g.start) for g in backend.gpu_instances(0)] == [(9, inst.devices["gpu_instance"]["start"])]
    assert backend.state["vf_types"] == {inst.devices["vfs"][0]["address"]: "H100XM-3-40C"}
    # a second start (after another stop, no reboot) sets the type again; the agent finds it there
    stop = world.client_a.post(f"/api/v1/instances/{inst.pk}/stop/", {"hard": True}, format="json")
    drive(stop.data["operation"]["id"])
    again = world.client_a.post(f"/api/v1/instances/{inst.pk}/start/")
    drive(again.data["operation"]["id"])
    assert agent.run() == ["set_vf_vgpu_type"]
    assert drive(again.data["operation"]["id"]).status == "succeeded"


def test_a_start_whose_gpu_instance_did_not_come_back_fails_and_keeps_the_allocation(world, timeline,  # noqa: F811
                                                                                    monkeypatch):
    from gpucloud_agent.backends.base import BackendError

    from .test_instance_lifecycle import _live_allocations

    inst, host, gpu, backend, agent = _hopper_mig(world, timeline)
    _stop_and_reboot(world, inst, host, gpu, backend)

    def lost(index, profile_id, start):
        raise BackendError("Insufficient Resources", "NVML_ERROR_INSUFFICIENT_RESOURCES")

    monkeypatch.setattr(backend, "create_gpu_instance", lost)
    start = world.client_a.post(f"/api/v1/instances/{inst.pk}/start/")
    drive(start.data["operation"]["id"])
    assert agent.run()[0] == "apply_mig_layout"
    op = drive(start.data["operation"]["id"])
    inst.refresh_from_db()
    assert (op.status, op.error_code, inst.status) == ("failed", "agent_command_failed", "error")
    assert "apply_mig_layout failed" in op.error_detail
    assert op.step == "wait_devices"  # failed before the domain was started
    assert ("mig", 1) in _live_allocations(inst.pk)  # kept until the tenant acts


def test_a_running_vm_whose_host_rebooted_comes_back_only_with_its_devices(world, timeline):  # noqa: F811
    """The host reboots under a running MIG VM: its domain is shut off (the reconciler makes the instance
    `stopped`, GPU held), the agent's next report has no GPU instances (the recorded layout is queued again) and
    the VF has no type. The tenant's start brings the GPU instance and the VF's type back before the VM runs."""
    from apps.compute.services.reconcile import instances_reconcile
    from apps.inventory.services.agent import host_inventory_sync

    inst, host, gpu, backend, agent = _hopper_mig(world, timeline)
    driver_for_host(host).domain_stop(inst.pk, hard=True)  # the reboot took the VM down
    backend.state["gis"]["0"], backend.state["vf_types"] = [], {}
    instances_reconcile()
    inst.refresh_from_db()
    assert inst.status == "stopped"
    host_inventory_sync(host=host, inventory={"gpus": [{"index": 0, "uuid": gpu.uuid, "model": gpu.model,
                                                        "mig": {"enabled": True, "layout": []}}]})
    gpu.refresh_from_db()
    assert gpu.observed["mig_restore_pending"] is True
    start = world.client_a.post(f"/api/v1/instances/{inst.pk}/start/")
    assert drive(start.data["operation"]["id"]).step == "wait_devices"
    assert agent.run() == ["apply_mig_layout", "set_vf_vgpu_type"]
    assert drive(start.data["operation"]["id"]).status == "succeeded"
    gpu.refresh_from_db()
    assert gpu.observed["mig_restore_pending"] is False and len(backend.gpu_instances(0)) == 1
    assert backend.state["vf_types"] == {inst.devices["vfs"][0]["address"]: "H100XM-3-40C"}


def test_a_start_after_a_failed_restore_fails_at_once(world, timeline, monkeypatch):  # noqa: F811
    from gpucloud_agent.backends.base import BackendError

    inst, host, gpu, backend, agent = _hopper_mig(world, timeline)
    _stop_and_reboot(world, inst, host, gpu, backend)

    def lost(index, profile_id, start):
        raise BackendError("Insufficient Resources", "NVML_ERROR_INSUFFICIENT_RESOURCES")

    monkeypatch.setattr(backend, "create_gpu_instance", lost)
    assert agent.run() == ["apply_mig_layout"]  # the restore fails before the tenant starts the VM
    start = world.client_a.post(f"/api/v1/instances/{inst.pk}/start/")
    op = drive(start.data["operation"]["id"])
    assert (op.status, op.error_code) == ("failed", "gpu_instance_missing"), op.error_detail
