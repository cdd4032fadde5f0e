"""The guest NUMA layout of a GPU VM: guest NUMA nodes that follow its GPUs' host NUMA nodes.

One guest node per host NUMA node that holds any of the VM's GPUs (an 8-GPU flavor on a 2-socket HGX host: two).
vCPUs and memory are split over the guest nodes in proportion to the GPUs on each (remainders to the first); with
memory in whole GiB (always with 1 GiB hugepages) every guest node gets whole GiB. A guest node's vCPUs are pinned
to its host node's CPUs, less the node's first physical core (both its threads), which is kept for the emulator
and I/O threads (`emulatorpin`), so QEMU's own threads never compete with the guest's vCPUs. Memory is bound strictly
to the guest node's host node. Recorded in `Instance.devices["numa"]`:

  {"cells": [{"host_node": int, "vcpus": [first, last], "cpus": [host CPU ids], "memory_mib": int}],
   "emulator_cpus": [host CPU ids]}

Errors (`DriverError`, the create fails with the code): `numa_memory_exceeded` when a guest node needs more memory
than its host node has (the flavor is too big for its GPUs' NUMA nodes on this host).
"""
from __future__ import annotations

from apps.core.drivers import DriverError
from apps.inventory.numa import guest_node_split, host_numa_nodes


def guest_numa(*, host, gpu_nodes: list[int], vcpus: int, memory_mib: int) -> dict | None:
    """The layout (module docstring) for a VM with `vcpus` and `memory_mib` (MiB) whose GPUs sit on `gpu_nodes`
    (one entry per GPU, host NUMA node ids). None for a VM without GPUs (left to the host's scheduler). The split
    is `apps.inventory.numa.guest_node_split`, the one placement checks hosts with (docs/adr/0510)."""
    if not gpu_nodes:
        return None
    nodes = host_numa_nodes(host)
    cells, emulator, first = [], [], 0
    for n, nv, mem in guest_node_split(gpu_nodes, vcpus, memory_mib):
        hn = nodes.get(n)
        if hn is not None and hn.memory_mib and mem > hn.memory_mib:
            raise DriverError(f"guest NUMA node on host node {n} needs {mem} MiB; the host node has "
                              f"{hn.memory_mib} MiB", code="numa_memory_exceeded")
        cpus: list[int] = []
        if hn is not None and hn.cores:
            spare = hn.cores[1:] or hn.cores  # a one-core node shares its core
            emulator += list(hn.cores[0])
            cpus = sorted(c for core in spare for c in core)
        cells.append({"host_node": n, "vcpus": [first, first + nv - 1], "cpus": cpus, "memory_mib": mem})
        first += nv
    return {"cells": cells, "emulator_cpus": sorted(emulator)}
