"""Attacks on the scrub (docs/compute.md, "Scrub"; ADR 0501): paths on which one project's GPU could reach another
project without the node agent having cleaned it after the first project's VM."""
from __future__ import annotations

import pytest
from gpucloud_agent.backends.fake import FakeBackend

from apps.compute.models import Instance
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
