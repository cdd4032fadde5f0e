"""A host's NUMA nodes: which host CPUs and how much memory each has, for guest NUMA layouts and CPU pinning.

Source, in order:
  1. what the agent reports in its host facts, `Host.observed["host"]["numa"]`: [{"node": int, "cpus": [int],
     "cores": [[int]] (the node's CPUs by physical core), "memory_mib": int}] (from
     /sys/devices/system/node/node*/cpulist and meminfo, and the CPUs' topology);
  2. else derived from the recorded counts (`cpu_sockets`, `cpu_cores`, `cpu_threads`, `memory_mib`, `numa_nodes`)
     with Linux's usual x86 enumeration: the first hardware thread of every core first, node by node, then the
     SMT siblings in the same order (CPU `c` and `c + cpu_cores` are one core's two threads); memory split evenly.

Units: CPU ids are the host kernel's logical CPU numbers; memory in MiB.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HostNode:
    """One host NUMA node. `cores` are its physical cores, each as the tuple of its hardware threads' CPU ids."""

    node: int
    cores: tuple[tuple[int, ...], ...]
    memory_mib: int

    @property
    def cpus(self) -> tuple[int, ...]:
        return tuple(sorted(c for core in self.cores for c in core))


def _derived(host) -> list[HostNode]:
    nodes = max(host.numa_nodes or 1, 1)
    cores = max(host.cpu_cores or 1, 1)
    smt = max((host.cpu_threads or cores) // cores, 1)
    per = max(cores // nodes, 1)
    out = []
    for n in range(nodes):
        first = range(n * per, min((n + 1) * per, cores))
        out.append(HostNode(n, tuple(tuple(c + t * cores for t in range(smt)) for c in first),
                            (host.memory_mib or 0) // nodes))
    return out


def _reported(raw: list) -> list[HostNode]:
    out = []
    for rec in sorted(raw, key=lambda r: int(r["node"])):
        if rec.get("cores"):
            cores = tuple(tuple(sorted(int(c) for c in core)) for core in rec["cores"])
        else:
            cores = tuple((c,) for c in sorted(int(c) for c in rec["cpus"]))
        out.append(HostNode(int(rec["node"]), tuple(sorted(cores)), int(rec.get("memory_mib") or 0)))
    return out


def host_numa_nodes(host) -> dict[int, HostNode]:
    """{node id: HostNode} for `host` (see the module docstring for where it comes from)."""
    raw = ((host.observed or {}).get("host") or {}).get("numa")
    try:
        nodes = _reported(raw) if raw else _derived(host)
    except (KeyError, TypeError, ValueError):
        nodes = _derived(host)
    return {n.node: n for n in nodes}


def split_units(total: int, weights: list[int], unit: int = 1) -> list[int]:
    """`total` split in proportion to `weights` in multiples of `unit` (remainders to the first parts, every part
    at least one unit: callers ensure ``total // unit >= len(weights)``)."""
    units, w = total // unit, sum(weights)
    parts = [units * x // w for x in weights]
    for i in range(units - sum(parts)):
        parts[i % len(parts)] += 1
    for i, p in enumerate(parts):
        if p == 0:
            parts[parts.index(max(parts))] -= 1
            parts[i] = 1
    return [p * unit for p in parts]


def guest_node_split(gpu_nodes, vcpus: int, memory_mib: int) -> list[tuple[int, int, int]]:
    """The guest NUMA nodes of a GPU VM (docs/adr/0505): one per host node holding any of its GPUs (`gpu_nodes`:
    one host node id per GPU), in node order, as ``(host node, vCPUs, memory MiB)``; vCPUs and memory split in
    proportion to the GPUs on each node (whole GiB per node when the memory is whole GiB). A VM too small to give
    every node a vCPU and a memory unit gets one node, the one with most GPUs. [] without GPUs."""
    counts: dict[int, int] = {}
    for n in gpu_nodes:
        counts[n] = counts.get(n, 0) + 1
    if not counts:
        return []
    order = sorted(counts)
    mem_unit = 1024 if memory_mib % 1024 == 0 else 1
    if vcpus < len(order) or memory_mib // mem_unit < len(order):
        order = [max(order, key=lambda n: (counts[n], -n))]
    weights = [counts[n] for n in order]
    return list(zip(order, split_units(vcpus, weights), split_units(memory_mib, weights, mem_unit), strict=True))


#: ``((node, CPUs, memory MiB), ...)`` of a host, in node order: what a guest node bound there may use at most.
NodeCaps = tuple[tuple[int, int, int], ...]


def node_caps(host) -> NodeCaps:
    """The host's NUMA nodes as `NodeCaps` (hardware threads and memory of each node; `host_numa_nodes`)."""
    return tuple((n.node, len(n.cpus), n.memory_mib) for n in host_numa_nodes(host).values())


def guest_numa_shortfall(gpu_nodes, vcpus: int, memory_mib: int, caps: NodeCaps) -> str:
    """Why a GPU VM of `vcpus` and `memory_mib` whose GPUs sit on `gpu_nodes` cannot have its guest NUMA nodes on
    a host with `caps` ('' when it can): a guest node needs more memory than its host node has, or more vCPUs
    than the node has hardware threads (its vCPUs are pinned to the node's CPUs and placement does not
    overcommit CPUs). A node the host does not describe (or describes without memory) is not checked."""
    by_node = {node: (cpus, mem) for node, cpus, mem in caps}
    for node, v, mem in guest_node_split(gpu_nodes, vcpus, memory_mib):
        cpus, have = by_node.get(node, (0, 0))
        if have and mem > have:
            return f"a guest NUMA node on host node {node} needs {mem} MiB; the host node has {have} MiB"
        if cpus and v > cpus:
            return f"a guest NUMA node on host node {node} needs {v} vCPUs; the host node has {cpus} CPUs"
    return ""
