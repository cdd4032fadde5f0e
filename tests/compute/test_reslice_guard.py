"""Re-slicing a GPU under tenants' VMs (docs/adr/0503): a staff MIG layout or GPU instance destroy under a running
VM's slice is refused from the ledger, and a GPU instance made outside placement is seen by placement, so a
request that cannot fit next to it is refused up front instead of failing at the agent command."""
from __future__ import annotations

import pytest

from apps.compute.models import Instance
from apps.inventory.models import AgentCommand, GpuInstance, VirtualFunction
from apps.scheduling.models import Allocation

from .conftest import create_body, drive, gpu_host
from .test_instance_lifecycle import _agent_complete

pytestmark = pytest.mark.django_db


def _hopper_mig_host(vfs: int = 2):
    host = gpu_host(gpus=1, mode="mig")
    gpu = host.gpus.get(index=0)
    VirtualFunction.objects.bulk_create([VirtualFunction(gpu=gpu, index=i, pci_address=f"0000:00:00.{i + 4}")
                                         for i in range(vfs)])
    return host, gpu


def _command(world, host, kind, **payload):
    return world.staff_client.post("/api/v1/agent-commands/", {"host": str(host.pk), "kind": kind,
                                                               "payload": payload}, format="json")


def test_a_mig_apply_under_a_running_vm_is_refused(world):
    host, gpu = _hopper_mig_host()
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.mig), format="json")
    op_id = resp.data["operation"]["id"]
    drive(op_id)
    _agent_complete(host, list(host.agent_commands.all()), {"gi_id": 2})
    assert drive(op_id).status == "succeeded"
    inst = Instance.objects.get(pk=resp.data["instance"]["id"])
    assert inst.status == "active" and inst.devices["gpu_instance"]["start"] == 4

    for kind, payload in (("apply_mig_layout", {"layout": [{"profile": "7g.80gb"}]}),
                          ("apply_mig_layout", {"layout": [{"profile": "3g.40gb", "start": 0}]}),
                          ("destroy_gpu_instance", {"start": 4})):
        refused = _command(world, host, kind, gpu_index=0, **payload)
        assert refused.status_code == 409, (kind, refused.content)
        body = refused.json()
        assert body["code"] == "gpu_allocated"
        assert [h["consumer_id"] for h in body["holders"]] == [str(inst.pk)]
    assert host.agent_commands.filter(status="queued").count() == 0
    assert list(GpuInstance.objects.filter(gpu=gpu).values_list("start", flat=True)) == [4]

    # once the VM is deleted and its slice scrubbed, the GPU may be re-sliced
    delete = world.client_a.delete(f"/api/v1/instances/{inst.pk}/")
    drive(delete.data["operation"]["id"])
    _agent_complete(host, list(host.agent_commands.filter(status="queued")))
    assert drive(delete.data["operation"]["id"]).status == "succeeded"
    assert _command(world, host, "apply_mig_layout", gpu_index=0,
                    layout=[{"profile": "7g.80gb"}]).status_code == 201


def test_a_gpu_instance_made_outside_placement_is_seen_by_placement(world):
    host, gpu = _hopper_mig_host()
    # staff make a 4g.40gb GPU instance at slice 0 by hand: placement never claimed it
    made = _command(world, host, "create_gpu_instance", gpu_index=0, profile="4g.40gb", start=0)
    assert made.status_code == 201, made.content
    _agent_complete(host, [AgentCommand.objects.get(pk=made.json()["id"])], {"gi_id": 1})
    assert list(GpuInstance.objects.filter(gpu=gpu).values_list("profile", "start")) == [("4g.40gb", 0)]

    # a 3g.40gb still fits beside it (slices 4-7, 3 of 7 compute slices left): placed there, not on slice 0
    first = world.client_a.post("/api/v1/instances/", create_body(world, world.mig), format="json")
    assert first.status_code == 202, first.content
    drive(first.data["operation"]["id"])
    (create,) = host.agent_commands.filter(kind="create_gpu_instance", status="queued")
    assert create.payload["start"] == 4
    _agent_complete(host, list(host.agent_commands.filter(status="queued")), {"gi_id": 2})
    assert drive(first.data["operation"]["id"]).status == "succeeded"

    # a second one has no room next to the hand-made instance and the first VM's: refused before anything is
    # claimed, not accepted and then failed by the agent command's planner (mig_layout_rejected)
    second = world.client_a.post("/api/v1/instances/", create_body(world, world.mig, name="vm-2"), format="json")
    assert second.status_code == 409, second.content
    assert second.json()["code"] == "capacity_unavailable"
    assert Instance.objects.count() == 1
    assert Allocation.objects.filter(resource_class="mig").count() == 1


def test_placement_waits_for_a_queued_layout_change(world):
    host, gpu = _hopper_mig_host()
    assert _command(world, host, "apply_mig_layout", gpu_index=0, layout=[{"profile": "7g.80gb"}]).status_code == 201
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.mig), format="json")
    assert resp.status_code == 409 and resp.json()["code"] == "capacity_unavailable", resp.content
    _agent_complete(host, list(host.agent_commands.all()),
                    {"layout": [{"profile_id": 0, "start": 0, "size": 8}]})
    assert world.client_a.post("/api/v1/instances/", create_body(world, world.mig),
                               format="json").status_code == 409  # 7g.80gb fills the GPU now


def test_a_whole_gpu_is_not_placed_while_a_mode_change_is_queued_for_it(world):
    """The guard at enqueue refuses a re-slice of a held GPU; the other way round, a GPU whose switch to MIG is
    queued for its agent is not claimed whole before the agent reports (every whole-GPU placement path)."""
    host = gpu_host(gpus=1)
    queued = _command(world, host, "apply_mig_layout", gpu_index=0, layout=[{"profile": "7g.80gb"}])
    assert queued.status_code == 201, queued.content
    for _ in range(2):  # the fast path, then the exact one (with a check first)
        refused = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
        assert refused.status_code == 409 and refused.json()["code"] == "capacity_unavailable", refused.content
    assert not Instance.objects.exists()
    # the agent could not switch it and rolled back: the GPU is a whole GPU again
    from apps.inventory.models import AgentCredential
    from apps.inventory.services.agent import agent_command_report

    cred = AgentCredential.objects.create(host=host, prefix=f"t{host.pk.hex[:12]}", secret_hash="x")
    agent_command_report(credential=cred, command_id=queued.json()["id"], succeeded=False, error="in use",
                         result={"code": "NVML_ERROR_IN_USE", "rolled_back": True, "layout": []})
    placed = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
    assert placed.status_code == 202, placed.content
