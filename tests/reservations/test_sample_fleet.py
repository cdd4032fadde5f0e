"""Acceptance on the inventory sample fleet (zone eu-west-a: 2 scalable units x 32 HGX H100 hosts, 8 IB rails,
one leaf per rail per SU): a lease of 8 HGX nodes lands under at most 2 leaf switches per rail when capacity
allows; when it cannot, the API's 409 names the topology constraint that failed."""
import io
import uuid

import pytest

from apps.inventory.demo import load_demo
from apps.inventory.models import Host
from apps.reservations.models import Lease
from apps.scheduling.ledger import AllocationSpec, ConsumerRef, allocations_claim
from apps.scheduling.models import Allocation
from apps.scheduling.placement.topology import host_topology, topology_cache_clear

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("reserved_capacity")]


@pytest.fixture
def sample():
    topology_cache_clear()
    load_demo(io.StringIO())
    yield
    topology_cache_clear()


def _su(name):
    return list(Host.objects.filter(scalable_unit__name=name, zone__name="eu-west-a").order_by("name"))


def _fill(project, hosts):
    for h in hosts:
        allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", project.id),
                          specs=[AllocationSpec(h.id, "gpu", gpu_id=g.id) for g in h.gpus.all()])


def _max_leaves(host_ids):
    topo = host_topology()
    per_rail = {}
    for h in host_ids:
        for rail, leaf in topo[h].leaves:
            per_rail.setdefault(rail, set()).add(leaf)
    return max(len(v) for v in per_rail.values()), len(per_rail)


def _post(world, **kw):
    return world.client_a.post("/api/v1/leases", {
        "project": str(world.project_a.pk), "name": kw.pop("name", "hgx8"), "kind": "hosts",
        "gpu_model": "H100-SXM5-80GB", "count": 8, "zone": "eu-west-a", "start": "2099-06-01 00:00",
        "end": "2099-06-08 00:00", **kw}, format="json")


def test_eight_hgx_nodes_land_under_at_most_two_leaves_per_rail(world, sample):
    su1, su2 = _su("su1"), _su("su2")
    _fill(world.project_b, su1[:27] + su2[:27])  # 5 free hosts per SU: 8 needs both SUs -> 2 leaves per rail
    r = _post(world, max_leaves_per_rail=2)
    assert r.status_code == 201, r.content
    hosts = set(Allocation.objects.filter(consumer_id=r.json()["id"]).values_list("host_id", flat=True))
    assert len(hosts) == 8
    leaves, rails = _max_leaves(hosts)
    assert (leaves, rails) == (2, 8)


def test_eight_nodes_under_one_leaf_when_one_su_has_room(world, sample):
    _fill(world.project_b, _su("su1")[:30])
    r = _post(world)  # no limit given: the tightest set still wins
    assert r.status_code == 201, r.content
    hosts = set(Allocation.objects.filter(consumer_id=r.json()["id"]).values_list("host_id", flat=True))
    assert _max_leaves(hosts)[0] == 1 and hosts <= {h.id for h in _su("su2")}


def test_the_409_names_the_failed_topology_constraint(world, sample):
    _fill(world.project_b, _su("su1")[:27] + _su("su2")[:27])
    r = _post(world, max_leaves_per_rail=1)
    assert r.status_code == 409
    doc = r.json()
    assert doc["code"] == "capacity_unavailable" and doc["constraint"] == "max_leaves_per_rail"
    assert doc["explanation"]["topology"]["max_leaves_per_rail"] == 2
    assert "limit 1" in doc["detail"] or "limit 1" in str(doc["explanation"])
    assert Lease.objects.get(pk=doc["lease"]).status == "rejected"


def _check_gpus(world, count: int) -> dict:
    r = world.client_a.post("/api/v1/leases/check/", {
        "project": str(world.project_a.pk), "name": "big", "kind": "gpus", "gpu_model": "H100-SXM5-80GB",
        "count": count, "start": "2099-06-01 00:00", "end": "2099-06-08 00:00"}, format="json")
    assert r.status_code == 200, r.content
    return r.json()


def test_a_gpu_lease_above_the_gpus_in_exclusive_mode_says_so(world, sample):
    """528 H100 GPUs, 16 of them in MIG mode (b-h100-mig-n01/02): 527 whole GPUs is not a shortage that an end
    of some allocation relieves, and the answer says why instead of 'fewer than 8 free GPUs' on every host."""
    out = _check_gpus(world, 527)
    assert (out["placeable"], out["code"], out["reason"], out["earliest_start"]) == (
        False, "capacity_unavailable", "gpu_mode", None)
    assert "528 H100-SXM5-80GB GPUs, of which only 512 are in exclusive mode" in out["detail"]
    assert out["explanation"]["gpu_mode"] == {"gpu_model": "H100-SXM5-80GB", "zone": "", "mode": "exclusive",
                                              "gpus_in_mode": 512, "gpus_in_fleet": 528, "requested": 527}
    assert _check_gpus(world, 512)["placeable"] is True


def test_a_gpu_lease_refused_after_its_own_chunks_says_they_count(world, sample):
    """Two GPUs are taken on two hosts: 511 of the 510 free cannot fit, and the refusal says that its own chunks
    filled the other hosts (the per-host counts read 'fewer than 8 free GPUs' on all 64 because of them)."""
    h1, h2 = _su("su1")[:2]
    for h in (h1, h2):
        allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", world.project_b.id),
                          specs=[AllocationSpec(h.id, "gpu", gpu_id=h.gpus.get(index=0).id)])
    out = _check_gpus(world, 511)
    assert (out["placeable"], out["code"]) == (False, "capacity_unavailable")
    assert out["detail"].startswith("The lease's first chunks took 496 of its 511 H100-SXM5-80GB GPUs; no host has "
                                    "8 more free over the window")
    assert out["explanation"]["lease"] == {"gpus": 511, "claimed_before": 496, "chunk_gpus": 8}
