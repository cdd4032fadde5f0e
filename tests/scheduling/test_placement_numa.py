"""Placement fits a VM's guest NUMA nodes to its GPUs' host NUMA nodes (docs/adr/0510): memory and vCPUs are
bound to the GPUs' nodes, so a host whose GPU nodes cannot hold them is not chosen, on every path."""
import datetime as dt
import uuid

import pytest

from apps.core import clock
from apps.inventory.models import Gpu
from apps.scheduling.ledger import AllocationSpec, ConsumerRef, allocations_claim
from apps.scheduling.placement import PlacementRequest, place

from . import fleet

pytestmark = pytest.mark.django_db
GIB = 1024


@pytest.fixture
def p():
    return fleet.project("numa")


def vm(p, **kw):
    kw.setdefault("provisioning_kind", "hypervisor")
    return PlacementRequest(project_id=p.id, **kw)


def _busy(p, host, index):
    """Hold one GPU of `host`, so binpack prefers it (fewer free GPUs)."""
    gpu = Gpu.objects.get(host=host, index=index)
    allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", p.id),
                      specs=[AllocationSpec(host.id, "gpu", gpu_id=gpu.pk)])


@pytest.mark.parametrize("path", ["fast", "exact", "window"])
def test_the_host_whose_gpu_nodes_hold_the_memory_is_chosen(p, path):
    """Two HGX hosts: 512 GiB per node (preferred by binpack: one GPU busy) and 2 TiB per node. 4 GPUs with 768 GiB
    live on one node's NVSwitch partition, so only the second host can hold them."""
    small, big = fleet.host(memory_mib=1024 * GIB), fleet.host(memory_mib=4096 * GIB)
    _busy(p, small, 7)
    kw = {"gpus_per_host": 4, "vcpus": 32, "memory_mib": 768 * GIB}
    if path == "window":
        kw.update(start=clock.now() + dt.timedelta(hours=1), end=clock.now() + dt.timedelta(hours=5))
    result = place(vm(p, **kw), explain=path == "exact")
    assert [c.hosts[0].host_id for c in result.candidates] == [big.id]
    if path == "exact":
        numa = next(f for f in result.explanation["filters"] if f["filter"] == "numa_capacity")
        assert numa["removed"] == 1 and "NUMA" in next(iter(numa["reasons"]))
    # the same request for bare metal (no guest NUMA nodes) may take the preferred host
    assert place(vm(p, **{**kw, "provisioning_kind": ""})).candidates[0].hosts[0].host_id == small.id


def test_a_pcie_host_spreads_the_gpus_over_its_nodes_when_one_node_is_too_small(p):
    """No NVSwitch partitions: 2 GPUs with 768 GiB take one GPU on each 512 GiB node (GPUs 0-3 node 0, 4-7 node 1)
    instead of GPUs 0 and 1 on node 0; 2 GPUs with 256 GiB stay on one node."""
    fleet.host(memory_mib=1024 * GIB, nvswitch="")
    spread = place(vm(p, gpus_per_host=2, vcpus=16, memory_mib=768 * GIB)).candidates[0].hosts[0]
    assert (spread.detail["gpu_indexes"], spread.detail["numa_nodes"]) == ([0, 4], [0, 1])
    packed = place(vm(p, gpus_per_host=2, vcpus=16, memory_mib=256 * GIB)).candidates[0].hosts[0]
    assert packed.detail["numa_nodes"] == [0]


def test_vcpus_beyond_the_gpu_node_are_refused_with_the_reason(p):
    """128 threads, 64 per node: one GPU with 100 vCPUs has no node to pin them to (the host as a whole has room)."""
    fleet.host(threads=128)
    result = place(vm(p, gpus_per_host=1, vcpus=100, memory_mib=64 * GIB), explain=True)
    assert not result.candidates
    assert [f["filter"] for f in result.explanation["filters"] if f["removed"]] == ["numa_capacity"]


def test_the_agents_reported_nodes_decide(p):
    """A host whose agent reports an uneven split (node 0: 256 GiB, node 1: 768 GiB): one GPU with 512 GiB goes
    on a node-1 GPU."""
    h = fleet.host(memory_mib=1024 * GIB, nvswitch="")
    h.observed = {"host": {"numa": [{"node": 0, "cpus": list(range(64)), "memory_mib": 256 * GIB},
                                    {"node": 1, "cpus": list(range(64, 128)), "memory_mib": 768 * GIB}]}}
    h.save(update_fields=["observed"])
    choice = place(vm(p, gpus_per_host=1, vcpus=8, memory_mib=512 * GIB)).candidates[0].hosts[0]
    assert choice.detail["numa_nodes"] == [1]
