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
