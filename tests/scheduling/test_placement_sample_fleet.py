"""Acceptance on the inventory's sample fleet (apps/inventory/fleets/sample.yaml: zone eu-west-a has 2 scalable
units x 32 HGX H100 hosts, 8 IB rails, one leaf per rail per SU): a 4-node x 8-GPU cluster lands under one leaf
per rail when one SU has room; when none has, the dry run names the topology constraint."""
import io
import uuid

import pytest

from apps.identity.models import StaffRole, User
from apps.inventory.demo import load_demo
from apps.inventory.models import Host
from apps.scheduling.ledger import AllocationSpec, ConsumerRef, allocations_claim
from apps.scheduling.placement import PlacementRequest
from apps.scheduling.placement.topology import host_topology, topology_cache_clear
from apps.scheduling.services import placement_claim

from . import fleet

pytestmark = pytest.mark.django_db


@pytest.fixture
def sample():
    topology_cache_clear()
    load_demo(io.StringIO())
    yield
    topology_cache_clear()


def _su_hosts(name):
    return list(Host.objects.filter(scalable_unit__name=name, zone__name="eu-west-a").order_by("name"))


def _fill(p, hosts):
    for h in hosts:
        allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", p.id),
                          specs=[AllocationSpec(h.id, "gpu", gpu_id=g.id) for g in h.gpus.all()])


def _leaves(hosts):
    topo = host_topology()
    per_rail = {}
    for h in hosts:
        for rail, leaf in topo[h].leaves:
            per_rail.setdefault(rail, set()).add(leaf)
    return per_rail


def test_four_by_eight_lands_under_one_leaf_per_rail(sample):
    p = fleet.project("acc")
    su1, su2 = _su_hosts("su1"), _su_hosts("su2")
    assert len(su1) == len(su2) == 32
    _fill(p, su1[:30])  # su1 keeps 2 free hosts, su2 has 32
    members = [ConsumerRef(uuid.uuid4(), "cluster_member", p.id) for _ in range(4)]
    req = PlacementRequest(project_id=p.id, gpus_per_host=8, hosts=4, gpu_models=("H100-SXM5-80GB",),
                           zone="eu-west-a")
    placed = placement_claim(actor=None, request=req, consumers=members)
    chosen = [h.host_id for h in placed.candidate.hosts]
    assert set(chosen) <= {h.id for h in su2}
    per_rail = _leaves(chosen)
    assert len(per_rail) == 8 and all(len(v) == 1 for v in per_rail.values())
    assert placed.candidate.topology == {"max_leaves_per_rail": 1, "spine_groups": 1, "fabrics": 1}


def test_no_su_has_room_dry_run_names_the_topology_constraint(sample, api_client):
    p = fleet.project("acc")
    su1, su2 = _su_hosts("su1"), _su_hosts("su2")
    _fill(p, su1[:29] + su2[:29])  # 3 free hosts in each SU
    staff = User.objects.create_user("op@x.test", password="pw-long-enough", staff_role=StaffRole.OPERATOR)
    api_client.force_authenticate(staff)
    body = {"project": str(p.id), "gpus_per_host": 8, "hosts": 4, "gpu_models": ["H100-SXM5-80GB"],
            "topology": {"max_leaves_per_rail": 1}}
    r = api_client.post("/api/v1/placement/candidates", body, format="json")
    out = r.json()
    assert r.status_code == 200 and out["placeable"] is False and out["code"] == "capacity_unavailable"
    topo = next(f for f in out["explanation"]["filters"] if f["filter"] == "topology")
    assert topo["removed"] == 6 and "max_leaves_per_rail" in topo["note"]
    assert out["explanation"]["topology"]["max_leaves_per_rail"] == 2
    # without the hard limit the same request spans two leaves per rail, inside the one fabric
    del body["topology"]
    soft = api_client.post("/api/v1/placement/candidates", body, format="json").json()
    assert soft["placeable"] is True
    assert soft["candidates"][0]["topology"] == {"max_leaves_per_rail": 2, "spine_groups": 1, "fabrics": 1}
