"""Attacks on the scrub (docs/compute.md, "Scrub"; ADR 0501): paths on which one project's GPU could reach another
project without the node agent having cleaned it after the first project's VM."""
from __future__ import annotations

import pytest
from gpucloud_agent.backends.fake import FakeBackend

from apps.compute.models import Instance
from apps.compute.services.hypervisor import driver_for_host
from apps.compute.services.reconcile import instances_reconcile
from apps.inventory.services.agent import agent_command_report, agent_commands_pull

from .conftest import drive, gpu_host
from .test_scrub import Agent, _create, timeline  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _clear_cache():
    from django.core.cache import cache

    cache.clear()


def test_a_reset_the_agent_took_before_the_vm_ran_does_not_count_as_its_scrub(world, timeline):  # noqa: F811
    """A staff reset of a free GPU that the agent has already pulled (dispatched) ran, or is running, before the
    tenant's VM: the scrub after that VM must queue a reset of its own, not reuse the one in flight."""
    host = gpu_host(gpus=1)
    agent = Agent(host, timeline, FakeBackend())
    staff = world.staff_client.post("/api/v1/agent-commands/", {"host": str(host.pk), "kind": "reset_gpu",
                                                                "payload": {"gpu_index": 0}}, format="json")
    assert staff.status_code == 201, staff.content
    (early,) = agent_commands_pull(credential=agent.cred)  # the agent took it and is resetting the free GPU

    first = _create(world, world.client_a, world.project_a, world.gpu1, "a-1")
    assert first.status_code == 202, first.data
    assert drive(first.data["operation"]["id"]).status == "succeeded"
    inst_a = Instance.objects.get(pk=first.data["instance"]["id"])
    delete = world.client_a.delete(f"/api/v1/instances/{inst_a.pk}/")
    assert drive(delete.data["operation"]["id"]).status == "succeeded"
    gpu = host.gpus.get()
    assert gpu.scrub_state == "dirty"

    # the early reset reports: it says nothing about the tenant's VM that ran after it
    agent_command_report(credential=agent.cred, command_id=early.pk, succeeded=True,
                         result={"gpu_index": 0, "health": "ok"})
    gpu.refresh_from_db()
    assert gpu.scrub_state == "dirty", gpu.scrub_reason
    refused = _create(world, world.client_b, world.project_b, world.gpu1, "b-1")
    assert (refused.status_code, refused.data["code"]) == (409, "capacity_unavailable"), refused.data

    assert agent.run() == ["reset_gpu"]
    gpu.refresh_from_db()
    assert gpu.scrub_state == "clean"
    second = _create(world, world.client_b, world.project_b, world.gpu1, "b-1")
    assert second.status_code == 202, second.data
    assert drive(second.data["operation"]["id"]).status == "succeeded"
    assert timeline == [("define", str(world.project_a.pk)), ("reset_gpu", 0), ("define", str(world.project_b.pk))]


class WorkerKilled(BaseException):
    """The worker process dies where this is raised: nothing after it runs, its open transaction rolls back."""


def test_a_delete_whose_worker_dies_between_and_inside_steps_never_hands_the_gpu_on_unscrubbed(
        world, timeline, monkeypatch):  # noqa: F811
    """The worker dies inside `release_devices` (after the scrub was queued, before the commit) and again between
    it and `release_allocations`: at no point is the GPU free in the ledger while the agent has not reset it, and
    the resumed delete finishes with the reset before the next project's define."""
    from apps.compute.services import devices as devsvc
    from apps.inventory.models import AgentCommand
    from apps.operations.runner import operation_run_step

    from .test_instance_lifecycle import _live_allocations

    host = gpu_host(gpus=1)
    agent = Agent(host, timeline, FakeBackend())
    first = _create(world, world.client_a, world.project_a, world.gpu1, "a-1")
    assert drive(first.data["operation"]["id"]).status == "succeeded"
    inst_a = Instance.objects.get(pk=first.data["instance"]["id"])
    op_id = world.client_a.delete(f"/api/v1/instances/{inst_a.pk}/").data["operation"]["id"]
    gpu = host.gpus.get()

    def refused():
        answer = _create(world, world.client_b, world.project_b, world.gpu1, "b-1")
        assert (answer.status_code, answer.data["code"]) == (409, "capacity_unavailable"), answer.data

    assert operation_run_step(op_id) == "destroy_domain"
    release = devsvc.devices_release

    def dies_after_the_scrub(**kw):
        release(**kw)
        raise WorkerKilled

    monkeypatch.setattr(devsvc, "devices_release", dies_after_the_scrub)
    with pytest.raises(WorkerKilled):
        operation_run_step(op_id)
    gpu.refresh_from_db()
    assert (gpu.scrub_state, AgentCommand.objects.filter(host=host, kind="reset_gpu").exists()) == ("clean", False)
    assert _live_allocations(inst_a.pk) != []  # rolled back with the step: the GPU is still the tenant's
    refused()

    monkeypatch.setattr(devsvc, "devices_release", release)  # the next worker resumes the operation
    assert operation_run_step(op_id) == "release_devices"
    assert operation_run_step(op_id) == "wait_devices_released"
    gpu.refresh_from_db()
    assert (gpu.scrub_state, _live_allocations(inst_a.pk) != []) == ("dirty", True)  # ... and it dies here
    refused()
    assert agent.run() == ["reset_gpu"]
    refused()  # clean now, but the delete has not released it yet

    assert drive(op_id).status == "succeeded"
    second = _create(world, world.client_b, world.project_b, world.gpu1, "b-1")
    assert second.status_code == 202, second.data
    assert drive(second.data["operation"]["id"]).status == "succeeded"
    assert timeline == [("define", str(world.project_a.pk)), ("reset_gpu", 0), ("define", str(world.project_b.pk))]


def test_a_free_passthrough_gpu_that_did_not_come_back_after_a_reboot_is_not_placed(world, timeline):  # noqa: F811
    """A host reboot loses a whole GPU no VM had: the restore binds every passthrough GPU of the host, not only its
    VMs', so the lost one is reported missing and leaves placement; the next project's create is not put on it."""
    from apps.inventory.services.agent import host_inventory_sync

    host = gpu_host(gpus=2)
    backend = FakeBackend()
    gpus = list(host.gpus.order_by("index"))
    for g, info in zip(gpus, backend.gpus()[:2], strict=True):
        g.pci_address = info.pci_address
        g.save(update_fields=["pci_address"])
    agent = Agent(host, timeline, backend)
    resp = _create(world, world.client_a, world.project_a, world.gpu1, "p-1")
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    inst = Instance.objects.get(pk=resp.data["instance"]["id"])

    def report(boot_id):
        host_inventory_sync(host=host, inventory={"host": {"boot_id": boot_id, "booted_at": backend.booted_at()},
                                                  "gpus": [{"index": g.index, "uuid": g.uuid, "model": g.model,
                                                            "pci_address": g.pci_address} for g in gpus]})

    report(backend.boot_id())
    (free,) = [g for g in gpus if g.pci_address not in inst.devices["pci"]]
    backend.state["lost"] = [free.pci_address]
    driver_for_host(host).domain_stop(inst.pk, hard=True)
    backend.reboot_host()
    report(backend.boot_id())
    instances_reconcile()
    assert agent.run() == ["restore_devices"]
    instances_reconcile()
    host.refresh_from_db()
    assert [m["pci_address"] for m in host.observed["reboot"]["missing"]] == [free.pci_address]
    free.refresh_from_db()
    assert free.health != "ok"
    refused = _create(world, world.client_b, world.project_b, world.gpu1, "b-1")
    assert (refused.status_code, refused.data["code"]) == (409, "capacity_unavailable"), refused.data
