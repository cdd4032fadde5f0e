"""GPU device preparation and release: a MIG slice handed over as a MIG-backed vGPU, on an SR-IOV VF (Hopper,
vendor VFIO) and on an mdev (Ampere); the agent creates and destroys the GPU instance at the planner's start."""
from __future__ import annotations

import pytest

from apps.compute.models import Flavor, Instance
from apps.compute.services.devices import mig_vgpu_type
from apps.compute.services.hypervisor import driver_for_host
from apps.inventory.models import GpuInstance, VirtualFunction
from apps.scheduling.models import Allocation

from .conftest import create_body, drive, gpu_host
from .test_instance_lifecycle import _agent_complete, _live_allocations

pytestmark = pytest.mark.django_db


def test_catalog_mig_backed_vgpu_types():
    assert mig_vgpu_type("H100-SXM5-80GB", "3g.40gb") == "H100XM-3-40C"
    assert mig_vgpu_type("A100-SXM4-80GB", "3g.40gb") == "A100DX-3-40C"
    assert mig_vgpu_type("L40S", "3g.40gb") == ""


def test_mig_on_hopper_uses_a_vf_and_the_agent(world):
    host = gpu_host(gpus=2, mode="mig")
    gpu = host.gpus.get(index=0)
    VirtualFunction.objects.bulk_create([VirtualFunction(gpu=gpu, index=i, pci_address=f"0000:00:00.{i + 4}")
                                         for i in range(2)])
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.mig), format="json")
    op_id = resp.data["operation"]["id"]
    op = drive(op_id)
    assert (op.status, op.step) == ("running", "wait_devices")
    cmd, vf_type = host.agent_commands.order_by("created_at")
    assert (cmd.kind, cmd.payload["gpu_index"], cmd.payload["profile"], cmd.payload["start"]) == (
        "create_gpu_instance", 0, "3g.40gb", 4)  # the planner's start slice (best fit: the top half first)
    # then the VF's vGPU type (the MIG-backed type of the profile), set by the agent before define
    assert (vf_type.kind, vf_type.payload["vf_address"], vf_type.payload["vgpu_type"]) == (
        "set_vf_vgpu_type", "0000:00:00.4", "H100XM-3-40C")
    _agent_complete(host, [cmd], {"gi_id": 2})
    assert drive(op_id).step == "wait_devices"
    _agent_complete(host, [vf_type])
    op = drive(op_id)
    inst = Instance.objects.get(pk=resp.data["instance"]["id"])
    assert (op.status, inst.status) == ("succeeded", "active")
    assert inst.devices["gpu_instance"] == {"gpu_index": 0, "start": 4, "profile": "3g.40gb"}
    assert inst.devices["vfs"] == [{"address": "0000:00:00.4", "vgpu_type": "H100XM-3-40C", "gpu_index": 0}]
    spec = driver_for_host(host).host.specs[inst.pk]
    assert [(d.address, d.is_vf, d.vgpu_type) for d in spec.hostdevs] == [("0000:00:00.4", True, "H100XM-3-40C")]
    assert _live_allocations(inst.pk) == [("memory_mib", 32768), ("mig", 1), ("vcpu", 4)]

    # a second slice on the same GPU gets the other VF; deleting the first leaves the second's GPU instance alone
    second = world.client_a.post("/api/v1/instances/", create_body(world, world.mig, name="vm-2"), format="json")
    drive(second.data["operation"]["id"])
    cmd2 = host.agent_commands.get(kind="create_gpu_instance", status="queued")
    _agent_complete(host, [cmd2, host.agent_commands.get(kind="set_vf_vgpu_type", status="queued")], {"gi_id": 1})
    assert drive(second.data["operation"]["id"]).status == "succeeded"
    other = Instance.objects.get(pk=second.data["instance"]["id"])
    assert other.devices["vfs"][0]["address"] == "0000:00:00.5"

    delete = world.client_a.delete(f"/api/v1/instances/{inst.pk}/")
    drive(delete.data["operation"]["id"])
    (destroy,) = host.agent_commands.filter(kind="destroy_gpu_instance")
    assert (destroy.payload["gpu_index"], destroy.payload["start"]) == (0, 4)
    _agent_complete(host, [destroy])
    assert drive(delete.data["operation"]["id"]).status == "succeeded"
    assert list(GpuInstance.objects.filter(gpu=gpu).values_list("start", flat=True)) == [other.devices[
        "gpu_instance"]["start"]]
    assert _live_allocations(inst.pk) == []


def test_mig_on_ampere_creates_an_mdev_through_the_driver(world):
    host = gpu_host(gpus=1, mode="mig", model="A100-SXM4-80GB")
    gpu = host.gpus.get()
    drv = driver_for_host(host)
    drv.host.mdev_types[gpu.pci_address] = {"nvidia-700": 2}
    flavor = Flavor.objects.create(name="a100-3g", vcpus=2, memory_mib=8192, gpu_form="mig",
                                   gpu_model="A100-SXM4-80GB", mig_profile="3g.40gb")

    def name_types(parent):  # the fake reports type names the way libvirt does: "GRID <vGPU type>"
        from apps.compute.drivers.base import MdevTypeInfo

        return [MdevTypeInfo("nvidia-700", "GRID A100DX-3-40C", 2)]

    drv.mdev_types = name_types
    resp = world.client_a.post("/api/v1/instances/", create_body(world, flavor), format="json")
    drive(resp.data["operation"]["id"])
    _agent_complete(host, host.agent_commands.all(), {"gi_id": 1})
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    inst = Instance.objects.get(pk=resp.data["instance"]["id"])
    (mdev,) = inst.devices["mdevs"]
    assert (mdev["mdev_type"], mdev["parent"], mdev["vgpu_type"]) == ("nvidia-700", gpu.pci_address, "A100DX-3-40C")
    assert list(drv.host.mdevs) == [mdev["uuid"]]
    delete = world.client_a.delete(f"/api/v1/instances/{inst.pk}/")
    op = drive(delete.data["operation"]["id"])
    assert (op.status, drv.host.mdevs) == ("succeeded", {})  # the mdev is gone; the GI's destroy is queued
    (destroy,) = host.agent_commands.filter(kind="destroy_gpu_instance")
    gpu.refresh_from_db()
    assert (gpu.scrub_state, gpu.scrub_commands) == ("dirty", [str(destroy.pk)])


def test_hopper_without_free_vf_is_unplaceable_and_holds_nothing(world):
    """RW-015/RW-016: a Hopper MIG slice reaches a VM only through an SR-IOV VF, so a GPU without a free VF in
    inventory is not capacity: placement refuses it (naming the VF filter) instead of failing after a claim."""
    gpu_host(gpus=1, mode="mig")
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.mig), format="json")
    assert resp.status_code == 422, resp.content      # never, with this inventory (ADR 0404): nothing written
    body = resp.json()
    assert (body["code"], body["reason"]) == ("unplaceable", "vf_capacity")
    assert {(f["filter"], f["removed"]) for f in body["explanation"]["filters"]} >= {("vf_capacity", 1)}
    assert not Instance.objects.exists()
    assert not Allocation.objects.exists()
