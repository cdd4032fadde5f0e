"""Multi-host (gang) placement across the network: one leaf per rail when a scalable unit has room."""
import uuid

import pytest

from apps.scheduling.errors import CapacityUnavailable
from apps.scheduling.ledger import AllocationSpec, ConsumerRef, allocations_claim
from apps.scheduling.models import Allocation
from apps.scheduling.placement import PlacementRequest, TopologyConstraint, place
from apps.scheduling.placement.topology import topology_cache_clear
from apps.scheduling.services import placement_claim

from . import fleet

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_topology():
    topology_cache_clear()
    yield
    topology_cache_clear()


def _su(name, n_hosts, fabric=None):
    su, leaves = fleet.su_with_leaves(name, rails=4, fabric=fabric)
    hosts = []
    for _ in range(n_hosts):
        h = fleet.host(su=su)
        fleet.cable(h, leaves, fabric)
        hosts.append(h)
    return su, hosts


def _fill(p, h):
    allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", p.id),
                      specs=[AllocationSpec(h.id, "gpu", gpu_id=g.id) for g in h.gpus.all()])


def cluster(p, **kw):
    return PlacementRequest(project_id=p.id, gpus_per_host=8, hosts=4, **kw)


def test_cluster_lands_under_one_leaf_per_rail_when_one_su_has_room():
    p = fleet.project("t")
    _, su1 = _su("su1", 5)
    _, su2 = _su("su2", 5)
    for h in su1[:2]:  # su1 has 3 free hosts, su2 has 5
        _fill(p, h)
    members = [ConsumerRef(uuid.uuid4(), "cluster_member", p.id) for _ in range(4)]
    placed = placement_claim(actor=None, request=cluster(p), consumers=members)
    chosen = {h.host_id for h in placed.candidate.hosts}
    assert chosen <= {h.id for h in su2}
    assert placed.candidate.topology["max_leaves_per_rail"] == 1
    assert Allocation.objects.filter(consumer_id__in=[m.id for m in members]).count() == 32


def test_binpack_prefers_the_tightest_su_that_fits():
    p = fleet.project("t")
    _, su1 = _su("su1", 6)
    _, su2 = _su("su2", 4)
    got = place(cluster(p)).candidates[0]
    assert {h.host_id for h in got.hosts} == {h.id for h in su2}


def test_no_su_with_room_the_dry_run_names_the_topology_constraint():
    p = fleet.project("t")
    _, su1 = _su("su1", 4)
    _, su2 = _su("su2", 4)
    _fill(p, su1[0])
    _fill(p, su2[0])
    strict = cluster(p, topology=TopologyConstraint(max_leaves_per_rail=1, one_fabric=True))
    result = place(strict, explain=True)
    assert not result.candidates
    topo = next(f for f in result.explanation["filters"] if f["filter"] == "topology")
    assert topo["removed"] == 6 and "max_leaves_per_rail" in topo["note"]
    assert result.explanation["topology"]["max_leaves_per_rail"] == 2
    with pytest.raises(CapacityUnavailable) as e:
        placement_claim(actor=None, request=strict, consumers=ConsumerRef(uuid.uuid4(), "lease", p.id))
    assert "max_leaves_per_rail" in str(e.value.explanation)
    # without the hard limit it spans two leaves per rail (the best available)
    soft = place(cluster(p)).candidates[0]
    assert soft.topology["max_leaves_per_rail"] == 2 and soft.topology["fabrics"] == 1


def test_cluster_stays_in_one_fabric():
    p = fleet.project("t")
    f2 = fleet.ib_fabric("ib1")
    _su("su1", 2)
    _su("su2", 4, fabric=f2)
    got = place(cluster(p)).candidates[0]
    assert got.topology["fabrics"] == 1 and got.topology["max_leaves_per_rail"] == 1
    one = cluster(p, topology=TopologyConstraint(one_fabric=True), gpu_models=("H100-SXM5-80GB",))
    assert place(one).candidates


def test_one_fabric_hard_limit_refuses_split():
    p = fleet.project("t")
    _su("su1", 2)
    _su("su2", 2, fabric=fleet.ib_fabric("ib1"))
    assert place(cluster(p)).candidates  # soft: spans fabrics as a last resort
    result = place(cluster(p, topology=TopologyConstraint(one_fabric=True)), explain=True)
    assert not result.candidates
    assert result.explanation["topology"]["constraint"] == "one_fabric"


def _host_doc(name, leaves, n):
    """A fleet document with host ``name`` in scalable unit su1 of zone z1: one GPU, one port per rail on port
    ``n`` of that rail's leaf."""
    ports = "".join(
        f'      - {{device: mlx5_{r}, port_guid: "0x{uuid.uuid4().int & (2**64 - 1):016x}", fabric: ib0, '
        f"rail: {r}, leaf_switch: {leaf.name}, leaf_port: {n}}}\n" for r, leaf in leaves.items())
    return (f"version: 1\nhosts:\n  - name: {name}\n    zone: z1\n    scalable_unit: su1\n"
            f"    serial: S-{uuid.uuid4().hex}\n    state: available\n    cpu_threads: 128\n    memory_mib: 1048576\n"
            f"    gpus:\n      - {{index: 0, model: H100-SXM5-80GB, uuid: GPU-{uuid.uuid4()}, "
            f'serial: G-{uuid.uuid4().hex}, pci_address: "0000:18:00.0"}}\n'
            f"    hca_ports:\n{ports}")


def test_a_host_imported_after_the_topology_was_cached_is_placed_at_once(settings,
                                                                          django_capture_on_commit_callbacks):
    """The cached topology is dropped when a fleet import commits, not only when PLACEMENT_TOPOLOGY_TTL_S ends."""
    from apps.inventory.services.fleet import fleet_import

    settings.PLACEMENT_TOPOLOGY_TTL_S = 3600
    p = fleet.project("t")
    _, leaves = fleet.su_with_leaves("su1", rails=2)
    for n in (1, 2, 3):
        fleet_import(actor=None, document=_host_doc(f"su1-n{n}", leaves, n), dry_run=False)
    request = PlacementRequest(project_id=p.id, gpus_per_host=1, hosts=4,
                               topology=TopologyConstraint(max_leaves_per_rail=1))
    assert not place(request).candidates  # three hosts; the topology is cached now
    with django_capture_on_commit_callbacks(execute=True):
        fleet_import(actor=None, document=_host_doc("su1-n4", leaves, 4), dry_run=False)
    got = place(request).candidates[0]
    assert sorted(h.host_name for h in got.hosts) == ["su1-n1", "su1-n2", "su1-n3", "su1-n4"]
    assert got.topology["max_leaves_per_rail"] == 1


def test_set_refusal_says_why_one_more_host_breaks_a_gang_s_limits():
    """A cluster member's re-place keeps the other members' hosts and adds one: the one-fabric rule, the leaf
    and spine limits and the NVLink-domain limit are each named."""
    from apps.inventory.models import Gpu
    from apps.scheduling.placement import set_refusal

    _, (a, b) = _su("su-a", 2)
    _, (c,) = _su("su-c", 1)
    other = fleet.ib_fabric("ib-other")
    _, (d,) = _su("su-d", 1, fabric=other)
    one = TopologyConstraint(one_fabric=True)
    assert set_refusal([a.id, b.id], one) == ""
    assert set_refusal([a.id, d.id], one) == "not on the gang's InfiniBand fabric"
    assert set_refusal([a.id, c.id], one) == ""
    tight = TopologyConstraint(one_fabric=True, max_leaves_per_rail=1)
    assert set_refusal([a.id, c.id], tight) == "more than 1 leaves on a rail with the gang"
    assert set_refusal([a.id, b.id], tight) == ""
    Gpu.objects.filter(host__in=[a, b]).update(nvlink_domain="rack-1")
    Gpu.objects.filter(host=c).update(nvlink_domain="rack-2")
    topology_cache_clear()
    nvl = TopologyConstraint(one_fabric=True, max_nvlink_domains=1)
    assert set_refusal([a.id, b.id], nvl) == ""
    assert set_refusal([a.id, c.id], nvl) == "more than 1 NVLink domains with the gang"
    assert set_refusal([a.id, d.id], TopologyConstraint(max_nvlink_domains=1)) == "no NVLink domain"


def test_max_nvlink_domains_keeps_the_gang_in_one_domain_over_a_tighter_ib_set():
    """SU a: hosts a0, a1 of NVLink domain "rack-1", a2, a3 of "rack-2"; SU b: b0 of "rack-1", b1, b2 of "rack-2".
    4 hosts would take SU a (one leaf per rail); one NVLink domain takes rack-2 across both SUs, which a hard
    one-leaf-per-rail limit on top refuses; 5 hosts fit no domain; 2 domains hold all 7."""
    from apps.inventory.models import Gpu

    p = fleet.project("nv")
    _, a = _su("nv-a", 4)
    _, b = _su("nv-b", 3)
    domain = {a[0].id: "rack-1", a[1].id: "rack-1", b[0].id: "rack-1",
              a[2].id: "rack-2", a[3].id: "rack-2", b[1].id: "rack-2", b[2].id: "rack-2"}
    for hid, name in domain.items():
        Gpu.objects.filter(host_id=hid).update(nvlink_domain=name)

    def gang(hosts, **limits):
        return PlacementRequest(project_id=p.id, gpus_per_host=8, hosts=hosts,
                                topology=TopologyConstraint(one_fabric=True, **limits))

    assert {h.host_id for h in place(gang(4)).candidates[0].hosts} == {h.id for h in a}
    one = place(gang(4, max_nvlink_domains=1)).candidates[0]
    assert {h.host_id for h in one.hosts} == {a[2].id, a[3].id, b[1].id, b[2].id}
    assert (one.topology["nvlink_domains"], one.topology["max_leaves_per_rail"]) == (1, 2)
    tight = place(gang(4, max_nvlink_domains=1, max_leaves_per_rail=1), explain=True)
    assert not tight.candidates and tight.explanation["topology"]["constraint"] == "max_leaves_per_rail"
    five = place(gang(5, max_nvlink_domains=1), explain=True)
    assert not five.candidates and five.explanation["topology"] == {
        "constraint": "max_nvlink_domains", "reason": "no NVLink domain holds 5 suitable hosts (largest domain: 4)"}
    assert place(gang(7, max_nvlink_domains=2)).candidates[0].topology["nvlink_domains"] == 2
