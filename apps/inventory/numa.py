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
