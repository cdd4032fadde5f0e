"""Tenant placement hints: `placement_policy` (pack | spread) on an instance or cluster goes to the placement
engine's weigher; a cluster's `topology` constraint goes to the engine's gang topology, and one that no set of the
fleet's hosts could meet is answered 400 with the engine's reason."""
from __future__ import annotations

import pytest

from apps.compute.models import Cluster, Instance
from apps.operations.models import Operation
from tests.scheduling import fleet

from .conftest import create_body, drive, gpu_host

pytestmark = pytest.mark.django_db


def _placed(world, name: str, **extra) -> Instance:
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1, name=name, **extra),
                               format="json")
    assert resp.status_code == 202, resp.content
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    return Instance.objects.get(pk=resp.data["instance"]["id"])


def test_spread_takes_the_emptier_host_and_pack_the_fuller(world):
    h1, h2 = gpu_host(gpus=8, nvswitch=""), gpu_host(gpus=8, nvswitch="")
    a = _placed(world, "a")
    b = _placed(world, "b")
    assert a.host_id == b.host_id  # the default is binpack
    full = a.host_id
    empty = ({h1.pk, h2.pk} - {full}).pop()
    c = _placed(world, "c", placement_policy="spread")
    assert (c.host_id, c.placement_policy) == (empty, "spread")
    assert world.client_a.get(f"/api/v1/instances/{c.pk}/").json()["placement_policy"] == "spread"
    d = _placed(world, "d", placement_policy="pack")
    assert (d.host_id, d.placement_policy) == (full, "pack")


def test_an_unknown_policy_is_refused(world):
    gpu_host(gpus=8, nvswitch="")
    r = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1, placement_policy="scatter"),
                            format="json")
    assert r.status_code == 400 and "placement_policy" in str(r.json())


def _two_sus(per_su: int = 2):
    hosts = []
    for name in ("su-x", "su-y"):
        su, leaves = fleet.su_with_leaves(name, rails=2)
        for _ in range(per_su):
            h = gpu_host(gpus=2, su=su, nvswitch="")
            fleet.cable(h, leaves)
            hosts.append(h)
    return hosts


def _cluster(world, size: int, name: str = "train", **extra):
    return world.client_a.post("/api/v1/clusters/", {
        "project": str(world.project_a.pk), "name": name, "flavor": str(world.gpu1.pk),
        "image": str(world.image.pk), "size": size, **extra}, format="json")


def test_an_impossible_topology_constraint_is_a_400_with_the_reason(world):
    _two_sus()
    r = _cluster(world, 3, topology={"max_leaves_per_rail": 1})
    body = r.json()
    assert (r.status_code, body["code"]) == (400, "topology_constraint_impossible"), (body.get("reason"), body)
    assert "max_leaves_per_rail" in str(body["errors"]["topology"])
    assert not Cluster.objects.exists()
    r = world.client_a.post("/api/v1/clusters/check/", {
        "project": str(world.project_a.pk), "name": "train", "flavor": str(world.gpu1.pk),
        "image": str(world.image.pk), "size": 3, "topology": {"max_leaves_per_rail": 1}}, format="json")
    assert (r.status_code, r.json()["code"]) == (400, "topology_constraint_impossible")
    r = _cluster(world, 3, topology={"max_leaves_per_rail": 0})
    assert r.status_code == 400 and "max_leaves_per_rail" in str(r.json())
    assert _cluster(world, 3).status_code == 201  # without the constraint it spans both units


def test_a_stated_topology_keeps_the_gang_under_one_leaf_per_rail(world):
    hosts = _two_sus()
    by_su = {h.pk: h.scalable_unit_id for h in hosts}
    r = _cluster(world, 2, topology={"max_leaves_per_rail": 1}, placement_policy="spread")
    assert r.status_code == 201, r.content
    cluster = Cluster.objects.get(pk=r.data["id"])
    assert (cluster.topology, cluster.placement_policy) == ({"max_leaves_per_rail": 1}, "spread")
    assert (r.json()["topology"], r.json()["placement_policy"]) == ({"max_leaves_per_rail": 1}, "spread")
    assert drive(Operation.objects.get(kind="cluster.create").pk).status == "succeeded"
    members = list(cluster.members.all())
    assert len({by_su[m.host_id] for m in members}) == 1 and len({m.host_id for m in members}) == 2
    assert {m.placement_policy for m in members} == {"spread"}


def _nvl_racks(per_rack: int = 2):
    """Two racks of GB200-style trays, all under one leaf per rail (one scalable unit): each rack's trays share one
    multi-node NVLink domain (`Gpu.nvlink_domain`), so the IB limits cannot tell the racks apart."""
    from apps.inventory.models import Gpu

    su, leaves = fleet.su_with_leaves("su-nvl", rails=2)
    racks = {}
    for rack in ("nvl72-a", "nvl72-b"):
        for _ in range(per_rack):
            h = gpu_host(gpus=2, su=su, nvswitch="")
            fleet.cable(h, leaves)
            Gpu.objects.filter(host=h).update(nvlink_domain=rack)
            racks[h.pk] = rack
    return racks


def test_one_nvlink_domain_keeps_the_gang_in_one_rack(world):
    racks = _nvl_racks()
    r = _cluster(world, 2, topology={"max_nvlink_domains": 1}, placement_policy="spread")
    assert r.status_code == 201, r.content
    assert r.json()["topology"] == {"max_nvlink_domains": 1}
    assert drive(Operation.objects.get(kind="cluster.create").pk).status == "succeeded"
    members = list(Cluster.objects.get(pk=r.data["id"]).members.all())
    assert len({m.host_id for m in members}) == 2 and len({racks[m.host_id] for m in members}) == 1


def test_one_nvlink_domain_too_small_for_the_gang_is_a_400_with_the_reason(world):
    """3 members, racks of 2 trays: no NVLink domain holds them (without the limit they span both racks); a host
    without an NVLink domain (PCIe GPUs, HGX hosts record their own) never counts."""
    _nvl_racks()
    r = _cluster(world, 3, topology={"max_nvlink_domains": 1})
    body = r.json()
    assert (r.status_code, body["code"]) == (400, "topology_constraint_impossible"), body
    assert "NVLink domain" in str(body["errors"]["topology"])
    assert not Cluster.objects.exists()
    assert _cluster(world, 3, topology={"max_nvlink_domains": 2}).status_code == 201
    assert _cluster(world, 3, name="t0", topology={"max_nvlink_domains": 0}).status_code == 400
