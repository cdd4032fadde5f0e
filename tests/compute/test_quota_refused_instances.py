"""An instance whose create failed (refused at placement for quota or capacity) holds no vCPU or memory quota:
before, it kept counting until the tenant deleted it, so one refusal could block every later create."""
from __future__ import annotations

import pytest

from apps.compute.models import Instance
from apps.tenancy.models import Quota

from .conftest import create_body, drive, gpu_host
from .test_placement_rule import _hold

pytestmark = pytest.mark.django_db


def _usage(world, resource: str) -> int:
    rows = world.client_a.get("/api/v1/quotas/", {"organization": str(world.org_a.pk), "resource": resource})
    return rows.json()["results"][0]["usage"]


def test_instance_refused_for_quota_at_placement_holds_no_vcpus_or_memory(world, django_capture_on_commit_callbacks):
    gpu_host(gpus=2)
    Quota.objects.filter(organization=world.org_a, resource="vcpus").update(limit=world.gpu1.vcpus)
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
    assert resp.status_code == 202, resp.content
    # the GPU quota is lowered before the worker places the instance: placement refuses it
    Quota.objects.filter(organization=world.org_a, resource="gpus").update(limit=0)
    op = drive(resp.data["operation"]["id"])
    assert (op.status, op.error_code) == ("failed", "quota_exceeded")
    inst = Instance.objects.get(pk=resp.data["instance"]["id"])
    assert (inst.status, inst.error_code) == ("error", "quota_exceeded")
    assert (_usage(world, "vcpus"), _usage(world, "memory_mib"), _usage(world, "instances")) == (0, 0, 1)
    again = world.client_a.post("/api/v1/instances/", create_body(world, world.cpu, name="vm-2"), format="json")
    assert again.status_code == 202, again.content  # 2 vCPUs fit: the refused instance holds none


def test_instance_refused_for_capacity_holds_no_vcpus(world):
    """The fleet could hold it but cannot now (another tenant holds the only GPU): 409 at once (ADR 0404),
    nothing written, so the refusal holds no vCPUs and the next create inside the quota goes through."""
    _hold(world, gpu_host(gpus=1), hours=None)
    Quota.objects.filter(organization=world.org_a, resource="vcpus").update(limit=world.gpu1.vcpus)
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
    assert (resp.status_code, resp.json()["code"]) == (409, "capacity_unavailable"), resp.content
    assert not Instance.objects.filter(project=world.project_a).exists()
    assert _usage(world, "vcpus") == 0
    gpu_host(gpus=2)
    again = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1, name="vm-2"), format="json")
    assert again.status_code == 202, again.content


def test_a_running_instance_keeps_its_vcpus_after_an_action_fails(world):
    """Only a create that never ran is exempt: an instance that ran and then failed still sits on its host."""
    gpu_host(gpus=2)
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.cpu), format="json")
    drive(resp.data["operation"]["id"])
    inst = Instance.objects.get(pk=resp.data["instance"]["id"])
    assert inst.status == "active" and inst.launched_at is not None
    Instance.objects.filter(pk=inst.pk).update(status="error", error_code="driver_error")
    assert _usage(world, "vcpus") == world.cpu.vcpus
