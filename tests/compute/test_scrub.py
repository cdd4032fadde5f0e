"""No release path hands an un-scrubbed device to another project: a GPU that held a tenant is `dirty` until the
node agent (here the real agent executor on its `fake` NVML backend, driven through the real command queue) has
destroyed the tenant's MIG GPU instance / deactivated its partition and reset the GPU, and placement never
chooses a dirty GPU."""
from __future__ import annotations

import pytest
from gpucloud_agent.backends.fake import FakeBackend
from gpucloud_agent.executor import Executor

from apps.compute.drivers.fake import FakeDriver
from apps.compute.models import Instance
from apps.compute.services.hypervisor import driver_for_host
from apps.compute.services.reconcile import instances_reconcile
from apps.inventory.models import AgentCredential, GpuInstance, VirtualFunction
from apps.inventory.services.agent import agent_command_report, agent_commands_pull

from .conftest import create_body, drive, gpu_host
from .test_instance_lifecycle import _live_allocations

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _clear_cache():
    from django.core.cache import cache

    cache.clear()


class Agent:
    """The node agent's command loop (pull, execute at most once, report) in process, writing one timeline with
    the hypervisor's domain definitions."""

    def __init__(self, host, timeline: list, backend: FakeBackend):
        self.cred = AgentCredential.objects.create(host=host, prefix=f"s{host.pk.hex[:12]}", secret_hash="x")
        self.backend, self.executor, self.timeline = backend, Executor(backend), timeline

    def run(self) -> list[str]:
        ran = []
        for cmd in agent_commands_pull(credential=self.cred):
            out = self.executor.execute({"id": str(cmd.pk), "kind": cmd.kind, "payload": cmd.payload})
            self.timeline.append((cmd.kind, cmd.payload.get("gpu_index", cmd.payload.get("partition_id"))))
            agent_command_report(credential=self.cred, command_id=cmd.pk, succeeded=out["succeeded"],
                                 result=out["result"], error=out["error"])
            ran.append(cmd.kind)
        return ran


@pytest.fixture
def timeline(monkeypatch):
    log: list = []
    define = FakeDriver.domain_define

    def recording(self, spec):
        log.append(("define", str(spec.project_id)))
        return define(self, spec)

    monkeypatch.setattr(FakeDriver, "domain_define", recording)
    return log


def _create(world, client, project, flavor, name):
    body = {**create_body(world, flavor, name=name), "project": str(project.pk)}
    return client.post("/api/v1/instances/", body, format="json")


def _vanish(inst, monkeypatch):
    driver_for_host(inst.host).domain_delete(inst.pk)  # gone behind our back (e.g. the host rebooted)
    monkeypatch.setenv("COMPUTE_VANISHED_GRACE_S", "0")
    instances_reconcile()  # missing
    assert instances_reconcile().errored == 1
    inst.refresh_from_db()
    assert (inst.status, inst.error_code, _live_allocations(inst.pk)) == ("error", "domain_vanished", [])


def test_vanished_whole_gpu_is_reset_before_the_next_tenant_gets_it(world, timeline, monkeypatch):
    host = gpu_host(gpus=1)
    agent = Agent(host, timeline, FakeBackend())
    first = _create(world, world.client_a, world.project_a, world.gpu1, "a-1")
    assert drive(first.data["operation"]["id"]).status == "succeeded"
    inst_a = Instance.objects.get(pk=first.data["instance"]["id"])
    _vanish(inst_a, monkeypatch)
    gpu = host.gpus.get()
    assert gpu.scrub_state == "dirty"

    # the ledger is free, but the GPU is dirty: the other tenant's create is refused, nothing is written
    refused = _create(world, world.client_b, world.project_b, world.gpu1, "b-1")
    assert (refused.status_code, refused.data["code"]) == (409, "capacity_unavailable"), refused.data
    assert Instance.objects.filter(project=world.project_b).count() == 0

    assert agent.run() == ["reset_gpu"]
    gpu.refresh_from_db()
    assert (gpu.scrub_state, gpu.health, agent.backend.state["resets"]["0"]) == ("clean", "ok", 1)
    second = _create(world, world.client_b, world.project_b, world.gpu1, "b-1")
    assert second.status_code == 202, second.data
    assert drive(second.data["operation"]["id"]).status == "succeeded"
    assert Instance.objects.get(pk=second.data["instance"]["id"]).host_id == host.pk
    assert timeline == [("define", str(world.project_a.pk)), ("reset_gpu", 0), ("define", str(world.project_b.pk))]


def test_vanished_mig_instance_is_destroyed_and_the_next_tenant_gets_a_new_one(world, timeline, monkeypatch):
    host = gpu_host(gpus=1, mode="mig")
    gpu = host.gpus.get()
    backend = FakeBackend(vfs_per_gpu=2)
    VirtualFunction.objects.bulk_create([VirtualFunction(gpu=gpu, index=v["index"], pci_address=v["pci_address"])
                                         for v in backend.gpus()[0].vfs])
    backend.set_mig_mode(0, True)
    agent = Agent(host, timeline, backend)
    first = _create(world, world.client_a, world.project_a, world.mig, "a-1")
    drive(first.data["operation"]["id"])
    assert agent.run() == ["create_gpu_instance", "set_vf_vgpu_type"]  # the GPU instance, then the VF's type
    assert drive(first.data["operation"]["id"]).status == "succeeded"
    inst_a = Instance.objects.get(pk=first.data["instance"]["id"])
    (gi_a,) = backend.gpu_instances(0)
    assert backend.state["vf_types"] == {inst_a.devices["vfs"][0]["address"]: "H100XM-3-40C"}
    _vanish(inst_a, monkeypatch)
    gpu.refresh_from_db()
    assert gpu.scrub_state == "dirty"
    assert list(GpuInstance.objects.filter(gpu=gpu).values_list("start", flat=True)) == [gi_a.start]  # leftover

    refused = _create(world, world.client_b, world.project_b, world.mig, "b-1")
    assert (refused.status_code, refused.data["code"]) == (409, "capacity_unavailable"), refused.data

    # MIG mode: the GPU's other instances may be live, no GPU reset; the MIG-backed vGPU's VF is reset first
    assert agent.run() == ["reset_vf", "destroy_gpu_instance"]
    gpu.refresh_from_db()
    vf = inst_a.devices["vfs"][0]["address"]
    assert (gpu.scrub_state, backend.gpu_instances(0), backend.state["vf_resets"]) == ("clean", [], {vf: 1})
    assert backend.state["vf_types"] == {}  # the reset cleared the VF's vGPU type
    second = _create(world, world.client_b, world.project_b, world.mig, "b-1")
    assert second.status_code == 202, second.data
    drive(second.data["operation"]["id"])
    assert agent.run() == ["create_gpu_instance", "set_vf_vgpu_type"]  # a new GPU instance, never the leftover one
    assert drive(second.data["operation"]["id"]).status == "succeeded"
    (gi_b,) = backend.gpu_instances(0)
    assert gi_b.gi_id != gi_a.gi_id
    assert timeline == [("create_gpu_instance", 0), ("set_vf_vgpu_type", 0), ("define", str(world.project_a.pk)),
                        ("reset_vf", 0), ("destroy_gpu_instance", 0), ("create_gpu_instance", 0),
                        ("set_vf_vgpu_type", 0), ("define", str(world.project_b.pk))]


def test_failed_create_scrubs_and_a_failed_reset_keeps_the_gpu_out(world, timeline, monkeypatch):
    host = gpu_host(gpus=1)
    agent = Agent(host, timeline, FakeBackend())
    first = _create(world, world.client_a, world.project_a, world.gpu1, "a-1")
    op_id = first.data["operation"]["id"]

    def broken_start(self, domain_uuid):
        from apps.core.drivers import DriverError

        raise DriverError("qemu died", code="domain_start_failed")

    monkeypatch.setattr(FakeDriver, "domain_start", broken_start)
    assert drive(op_id).status == "failed"
    gpu = host.gpus.get()
    assert gpu.scrub_state == "dirty"

    def reset_fails(index):
        from gpucloud_agent.backends.base import BackendError

        raise BackendError("GPU is lost", "NVML_ERROR_GPU_IS_LOST")

    reset = agent.backend.reset_gpu
    agent.backend.reset_gpu = reset_fails
    assert agent.run() == ["reset_gpu"]
    gpu.refresh_from_db()
    assert (gpu.scrub_state, gpu.scrub_reason) == ("scrub_failed", "reset_gpu failed: GPU is lost")
    refused = _create(world, world.client_b, world.project_b, world.gpu1, "b-1")
    assert (refused.status_code, refused.data["code"]) == (409, "capacity_unavailable")
    host.refresh_from_db()
    host.state = "cordoned"
    host.save(update_fields=["state"])
    answer = world.staff_client.post(f"/api/v1/hosts/{host.pk}/mark-available/", {"reason": "x"}, format="json")
    assert (answer.status_code, answer.data["code"]) == (409, "gpu_scrub_pending")

    # staff fix the GPU and queue the scrub again; the reset passes and the host can be made available
    agent.backend.reset_gpu = reset
    retry = world.staff_client.post(f"/api/v1/gpus/{gpu.pk}/scrub/", {"reason": "reseated"}, format="json")
    assert (retry.status_code, retry.data["scrub_state"]) == (200, "dirty"), retry.data
    assert agent.run() == ["reset_gpu"]
    gpu.refresh_from_db()
    assert gpu.scrub_state == "clean"
    again = world.staff_client.post(f"/api/v1/gpus/{gpu.pk}/scrub/", {"reason": "again"}, format="json")
    assert (again.status_code, again.data["code"]) == (409, "gpu_scrub_not_failed")
    answer = world.staff_client.post(f"/api/v1/hosts/{host.pk}/mark-available/", {"reason": "x"}, format="json")
    assert answer.status_code == 200, answer.data


def _vgpu_host(*, vfs_per_gpu: int):
    """A one-GPU host in vGPU mode with the fake backend's SR-IOV VFs recorded, and an H100 vGPU flavor:
    (flavor, host, gpu, backend)."""
    from apps.compute.models import Flavor

    vgpu = Flavor.objects.create(name="v8-h100", vcpus=4, memory_mib=16384, gpu_form="vgpu",
                                 gpu_model="H100-SXM5-80GB", vgpu_type="H100XM-8C")
    host = gpu_host(gpus=1, mode="vgpu")
    gpu = host.gpus.get()
    backend = FakeBackend(vfs_per_gpu=vfs_per_gpu)
    VirtualFunction.objects.bulk_create([VirtualFunction(gpu=gpu, index=v["index"], pci_address=v["pci_address"])
                                         for v in backend.gpus()[0].vfs])
    return vgpu, host, gpu, backend


def test_recreate_off_a_host_scrubs_the_old_gpu_before_the_next_tenant_gets_it(world, timeline):
    """The path a drained or failing host's VM leaves by (health's remediation re-creates it elsewhere): the old
    GPU is dirty from the step that releases it until the old host's agent has reset it."""
    from apps.compute.services.instances import instance_recreate

    old, new = gpu_host(gpus=1), gpu_host(gpus=1)
    agent = Agent(old, timeline, FakeBackend())
    first = _create(world, world.client_a, world.project_a, world.gpu1, "a-1")
    assert drive(first.data["operation"]["id"]).status == "succeeded"
    inst_a = Instance.objects.get(pk=first.data["instance"]["id"])
    assert inst_a.host_id == old.pk
    assert drive(str(instance_recreate(actor=None, instance=inst_a, reason="drain").pk)).status == "succeeded"
    inst_a.refresh_from_db()
    gpu = old.gpus.get()
    assert (inst_a.host_id, _live_allocations(inst_a.pk) != [], gpu.scrub_state) == (new.pk, True, "dirty")

    refused = _create(world, world.client_b, world.project_b, world.gpu1, "b-1")
    assert (refused.status_code, refused.data["code"]) == (409, "capacity_unavailable"), refused.data
    assert agent.run() == ["reset_gpu"]
    gpu.refresh_from_db()
    assert gpu.scrub_state == "clean"
    second = _create(world, world.client_b, world.project_b, world.gpu1, "b-1")
    assert second.status_code == 202, second.data
    assert drive(second.data["operation"]["id"]).status == "succeeded"
    assert Instance.objects.get(pk=second.data["instance"]["id"]).host_id == old.pk
    assert timeline == [("define", str(world.project_a.pk)), ("define", str(world.project_a.pk)),
                        ("reset_gpu", 0), ("define", str(world.project_b.pk))]


def test_vanished_vgpu_vf_is_reset_before_the_next_tenant_gets_a_vgpu_on_its_gpu(world, timeline, monkeypatch):
    """A vGPU on an SR-IOV VF (Hopper): the VF's GPU is dirty until the agent cleared the VF's vGPU and reset it
    (ADR 0502); the other tenant's vGPU on that GPU is placed only after."""
    vgpu, host, gpu, backend = _vgpu_host(vfs_per_gpu=2)
    agent = Agent(host, timeline, backend)
    first = _create(world, world.client_a, world.project_a, vgpu, "a-1")
    assert drive(first.data["operation"]["id"]).status == "running"  # waits for the VF's vGPU type
    assert agent.run() == ["set_vf_vgpu_type"]
    assert drive(first.data["operation"]["id"]).status == "succeeded"
    inst_a = Instance.objects.get(pk=first.data["instance"]["id"])
    (vf,) = inst_a.devices["vfs"]
    assert backend.state["vf_types"] == {vf["address"]: "H100XM-8C"}
    _vanish(inst_a, monkeypatch)
    gpu.refresh_from_db()
    assert gpu.scrub_state == "dirty"

    refused = _create(world, world.client_b, world.project_b, vgpu, "b-1")
    assert (refused.status_code, refused.data["code"]) == (409, "capacity_unavailable"), refused.data
    assert Instance.objects.filter(project=world.project_b).count() == 0

    assert agent.run() == ["reset_vf"]
    gpu.refresh_from_db()
    assert (gpu.scrub_state, backend.state["vf_resets"], backend.state["vf_types"]) == (
        "clean", {vf["address"]: 1}, {})
    second = _create(world, world.client_b, world.project_b, vgpu, "b-1")
    assert second.status_code == 202, second.data
    drive(second.data["operation"]["id"])
    assert agent.run() == ["set_vf_vgpu_type"]
    assert drive(second.data["operation"]["id"]).status == "succeeded"
    assert Instance.objects.get(pk=second.data["instance"]["id"]).host_id == host.pk
    assert timeline == [("set_vf_vgpu_type", 0), ("define", str(world.project_a.pk)), ("reset_vf", 0),
                        ("set_vf_vgpu_type", 0), ("define", str(world.project_b.pk))]


def test_a_failed_vf_reset_keeps_the_gpu_out_until_staff_retry_it(world, timeline, monkeypatch):
    """A VF reset that fails (the VF still in use, or gone) makes its GPU `scrub_failed`; staff's retry queues the
    VF reset again and only its success makes the GPU clean."""
    vgpu, host, gpu, backend = _vgpu_host(vfs_per_gpu=1)
    agent = Agent(host, timeline, backend)
    first = _create(world, world.client_a, world.project_a, vgpu, "a-1")
    drive(first.data["operation"]["id"])
    assert agent.run() == ["set_vf_vgpu_type"]
    assert drive(first.data["operation"]["id"]).status == "succeeded"
    inst_a = Instance.objects.get(pk=first.data["instance"]["id"])
    delete = world.client_a.delete(f"/api/v1/instances/{inst_a.pk}/")
    assert drive(delete.data["operation"]["id"]).status == "succeeded"
    gpu.refresh_from_db()
    assert gpu.scrub_state == "dirty"

    def busy(address):
        from gpucloud_agent.backends.base import BackendError

        raise BackendError(f"VF {address} reset failed: Device or resource busy", "vf_reset_failed")

    reset, backend.reset_vf = backend.reset_vf, busy
    assert agent.run() == ["reset_vf"]
    gpu.refresh_from_db()
    assert gpu.scrub_state == "scrub_failed"
    assert gpu.scrub_reason.startswith("reset_vf failed: VF ")
    refused = _create(world, world.client_b, world.project_b, vgpu, "b-1")
    assert (refused.status_code, refused.data["code"]) == (409, "capacity_unavailable"), refused.data

    backend.reset_vf = reset
    retry = world.staff_client.post(f"/api/v1/gpus/{gpu.pk}/scrub/", {"reason": "VM gone"}, format="json")
    assert (retry.status_code, retry.data["scrub_state"]) == (200, "dirty"), retry.data
    assert agent.run() == ["reset_vf"]
    gpu.refresh_from_db()
    assert gpu.scrub_state == "clean"
    assert _create(world, world.client_b, world.project_b, vgpu, "b-1").status_code == 202
