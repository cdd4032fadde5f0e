"""Clusters: members placed all-or-nothing (one gang claim), created through the instance workflow, deleted
together."""
from __future__ import annotations

import pytest

from apps.compute.models import Cluster, Instance
from apps.operations.models import Operation
from apps.scheduling.models import Allocation
from tests.scheduling import fleet

from .conftest import drive, gpu_host
from .test_instance_lifecycle import _live_allocations

pytestmark = pytest.mark.django_db


def _cabled_hosts(n: int, gpus: int = 2):
    su, leaves = fleet.su_with_leaves("su-c", rails=2)
    hosts = [gpu_host(gpus=gpus, su=su) for _ in range(n)]
    for h in hosts:
        fleet.cable(h, leaves)
    return hosts


def _body(world, size: int, name: str = "train") -> dict:
    return {"project": str(world.project_a.pk), "name": name, "flavor": str(world.gpu1.pk),
            "image": str(world.image.pk), "size": size}


def test_cluster_members_land_on_distinct_hosts_and_delete_together(world):
    hosts = _cabled_hosts(3)
    resp = world.client_a.post("/api/v1/clusters/", _body(world, 2), format="json")
    assert resp.status_code == 201, resp.content
    cluster = Cluster.objects.get(pk=resp.data["id"])
    assert drive(Operation.objects.get(kind="cluster.create").pk).status == "succeeded"
    members = list(cluster.members.order_by("name"))
    assert [m.name for m in members] == ["train-0", "train-1"]
    assert len({m.host_id for m in members}) == 2 and {m.host_id for m in members} <= {h.pk for h in hosts}
    # the members are started, not running: the cluster says so until every member is active
    cluster.refresh_from_db()
    assert cluster.status == "pending"
    assert world.client_a.get(f"/api/v1/clusters/{cluster.pk}/").json()["status"] == "pending"
    first, second = Operation.objects.filter(kind="instance.create").order_by("target_id")
    assert drive(first.pk).status == "succeeded"
    cluster.refresh_from_db()
    assert cluster.status == "pending"       # one member active, the other still being created
    assert drive(second.pk).status == "succeeded"
    cluster.refresh_from_db()
    assert cluster.status == "active"
    assert sorted(Instance.objects.filter(cluster=cluster).values_list("status", flat=True)) == ["active", "active"]

    assert world.client_a.delete(f"/api/v1/clusters/{cluster.pk}/").status_code == 202
    for op in Operation.objects.filter(kind="instance.delete"):
        drive(op.pk)
        host = Instance.objects.get(pk=op.target_id).host
        from .test_instance_lifecycle import _agent_complete

        _agent_complete(host, host.agent_commands.filter(status="queued"))
        assert drive(op.pk).status == "succeeded"
    cluster.refresh_from_db()
    assert cluster.status == "deleted"
    assert all(_live_allocations(m.pk) == [] for m in members)


def test_cluster_that_does_not_fit_claims_nothing(world):
    """Three members on two one-GPU hosts: never placeable, refused before anything is written (the placement
    rule, tests/compute/test_placement_rule.py)."""
    _cabled_hosts(2, gpus=1)
    resp = world.client_a.post("/api/v1/clusters/", _body(world, 3), format="json")
    assert (resp.status_code, resp.json()["code"]) == (422, "unplaceable")
    assert Cluster.objects.count() == 0
    assert Allocation.objects.count() == 0
    assert Operation.objects.count() == 0


def test_a_cluster_whose_member_fails_is_in_error_not_active(world):
    """A member's create that fails leaves the cluster in `error` with the member's reason (never `active`)."""
    from apps.compute.workflows import create_failed

    _cabled_hosts(3)
    resp = world.client_a.post("/api/v1/clusters/", _body(world, 2), format="json")
    assert resp.status_code == 201, resp.content
    cluster = Cluster.objects.get(pk=resp.data["id"])
    assert drive(Operation.objects.get(kind="cluster.create").pk).status == "succeeded"
    first, second = Operation.objects.filter(kind="instance.create").order_by("target_id")
    assert drive(first.pk).status == "succeeded"
    from django.db import transaction

    with transaction.atomic():
        create_failed(second, "boot_timeout", "the domain did not start")
    body = world.client_a.get(f"/api/v1/clusters/{cluster.pk}/").json()
    failed = Instance.objects.get(pk=second.target_id)
    assert (body["status"], body["error_code"]) == ("error", "boot_timeout")
    assert body["error_reason"] == f"member {failed.name} failed: the domain did not start"
