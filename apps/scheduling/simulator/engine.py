"""Replay engine: place each arriving request on arrival (or fail it), with the in-memory backend.

Protocol (as published with the trace's arrival sequences): arrivals only; a request that fits some
host is never refused (the engine only fails a request when no host is feasible, and checks it); ties between
equal integer scores go to the lowest rank, where ranks are a random permutation of the hosts (sorted by name)
seeded by the replay seed, as the published simulator prefixes node names with ``rand.Perm`` indices.

Metrics are measured after every arrival and bucketed like the published analysis
(``fgd-expected-results/README.md``): arrived workload % rounded to a whole percent (half to even), allocation %
and fragmentation % rounded to 2 decimals, averaged per bucket (an empty bucket takes the arrivals within +-1).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from apps.scheduling.policies.base import NodeBatch, NodeView, PodRequest
from apps.scheduling.policies.fragmentation import FragModel
from apps.scheduling.policies.policy import Policy

LEVELS = tuple(range(0, 131))


@dataclass
class ReplayResult:
    policy: str
    workload: str
    seed: int  # the arrival sequence
    total_gpu_milli: int
    arrived_pct: np.ndarray  # after each arrival
    alloc_pct: np.ndarray
    frag_pct: np.ndarray
    placements: list = field(repr=False)  # (row or -1, gpus tuple) per arrival
    failed: int = 0
    seconds: float = 0.0  # wall clock
    cpu_seconds: float = 0.0  # process CPU time (unaffected by other processes on a shared machine)

    def curve(self, which: str = "alloc") -> dict[int, float]:
        """{arrived level %: mean metric %} for levels 0..130, bucketed like the published tables."""
        values = self.alloc_pct if which == "alloc" else self.frag_pct
        return bucket_curve(self.arrived_pct, values)

    def at(self, level: int = 130, which: str = "alloc") -> float:
        return self.curve(which)[level]


def bucket_curve(arrived_pct: np.ndarray, values: np.ndarray) -> dict[int, float]:
    buckets = np.round(arrived_pct, 0)
    vals = np.round(values, 2)
    out: dict[int, float] = {}
    for level in LEVELS:
        sel = vals[buckets == level]
        if sel.size == 0:
            sel = vals[(buckets >= level - 1) & (buckets <= level + 1)]
            if sel.size == 0:
                continue
        out[level] = round(float(sel.mean()), 2)
    return out


def tie_ranks(n: int, seed: int) -> np.ndarray:
    """Rank of each host (hosts sorted by name): a permutation of 0..n-1 seeded by ``seed``."""
    return np.random.default_rng(seed).permutation(n).astype(np.int64)


def replay(nodes: list[NodeView], pods: list[PodRequest], policy: Policy, frag: FragModel, *,
           seed: int, workload: str = "", check_refusals: bool = True, tie_seed: int | None = None) -> ReplayResult:
    """Replay ``pods`` on fresh ``nodes`` with ``policy``; ``frag`` measures fragmentation (FGD's measure).

    ``seed`` names the arrival sequence; the tie ranks and the policy's randomness are seeded by ``tie_seed``,
    which defaults to ``seed`` (the published protocol). A different ``tie_seed`` replays the same arrivals with
    another tie order (``bench/tie_order_spread.py``).
    """
    t0, c0 = time.perf_counter(), time.process_time()
    ties = seed if tie_seed is None else tie_seed
    batch = NodeBatch.from_views(nodes, rank=tie_ranks(len(nodes), ties))
    policy.reset(ties)
    total = int(np.where(batch.gpu_free > 0, batch.gpu_free, 0).sum())
    frag_values = frag.host_state(batch)[3]  # updated in place by batch.apply
    frag_sum = int(frag_values.sum())
    n = len(pods)
    arrived = np.empty(n)
    alloc = np.empty(n)
    fragp = np.empty(n)
    placements: list = []
    arrived_milli = used_milli = failed = 0
    for i, req in enumerate(pods):
        arrived_milli += req.total_gpu_milli
        choice = policy.place(batch, req)
        if choice is None:
            if check_refusals and batch.feasible_rows(req).size:
                raise AssertionError(f"{req.name} refused although a host fits it")
            failed += 1
            placements.append((-1, ()))
        else:
            before = frag_values[choice.row]
            batch.apply(choice.row, req, choice.gpus)
            frag_sum += int(frag_values[choice.row] - before)
            used_milli += req.total_gpu_milli
            placements.append((choice.row, choice.gpus))
        arrived[i] = arrived_milli / (total / 1000) / 10
        alloc[i] = used_milli / (total / 1000) / 10
        fragp[i] = frag_sum / frag.total / total * 100
    return ReplayResult(policy=policy.name, workload=workload, seed=seed, total_gpu_milli=total,
                        arrived_pct=arrived, alloc_pct=alloc, frag_pct=fragp, placements=placements,
                        failed=failed, seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0)


def export_placements(result: ReplayResult, nodes: list[NodeView], pods: list[PodRequest], path: Path) -> None:
    """Write the placement file of ``sequences/README.md``: one JSON object per arrival, in order."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for req, (row, gpus) in zip(pods, result.placements, strict=True):
            fh.write(json.dumps({"pod": req.name, "node": nodes[row].name if row >= 0 else None,
                                 "gpus": list(gpus), "milli": req.gpu_milli}) + "\n")
