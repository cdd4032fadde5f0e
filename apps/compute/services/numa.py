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
from apps.inventory.numa import host_numa_nodes


def _split(total: int, weights: list[int], unit: int = 1) -> list[int]:
    units, w = total // unit, sum(weights)
    parts = [units * x // w for x in weights]
    for i in range(units - sum(parts)):
        parts[i % len(parts)] += 1
    for i, p in enumerate(parts):  # every guest node gets at least one unit (callers ensure units >= nodes)
        if p == 0:
            parts[parts.index(max(parts))] -= 1
            parts[i] = 1
    return [p * unit for p in parts]


def guest_numa(*, host, gpu_nodes: list[int], vcpus: int, memory_mib: int) -> dict | None:
    """The layout (module docstring) for a VM with `vcpus` and `memory_mib` (MiB) whose GPUs sit on `gpu_nodes`
    (one entry per GPU, host NUMA node ids). None for a VM without GPUs (left to the host's scheduler)."""
    if not gpu_nodes:
        return None
    nodes = host_numa_nodes(host)
    counts: dict[int, int] = {}
    for n in gpu_nodes:
        counts[n] = counts.get(n, 0) + 1
    order = sorted(counts)
    mem_unit = 1024 if memory_mib % 1024 == 0 else 1
    if vcpus < len(order) or memory_mib // mem_unit < len(order):  # a guest node needs a vCPU and memory:
        # keep the node with most GPUs
        order = [max(order, key=lambda n: (counts[n], -n))]
    weights = [counts[n] for n in order]
    vsplit = _split(vcpus, weights)
    msplit = _split(memory_mib, weights, mem_unit)
    cells, emulator, first = [], [], 0
    for n, nv, mem in zip(order, vsplit, msplit, strict=True):
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
