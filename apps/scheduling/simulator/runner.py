"""Run replays of the FGD protocol for (workload, policy, seed) combinations; shared by
``manage.py simulate`` and ``bench/simulate_openb.py``.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from apps.scheduling.policies import FragModel, PodTypeDistribution, get_policy

from . import trace
from .engine import ReplayResult, export_placements, replay


@dataclass
class ReplaySummary:
    workload: str
    policy: str
    seed: int
    alloc_130: float
    frag_130: float
    failed: int
    pods: int
    seconds: float
    cpu_seconds: float = 0.0
    alloc_curve: dict = field(repr=False, default_factory=dict)
    frag_curve: dict = field(repr=False, default_factory=dict)
    tie_seed: int | None = None  # seed of the tie order (None or ``seed``: the published protocol)

    def as_dict(self) -> dict:
        return {"workload": self.workload, "policy": self.policy, "seed": self.seed, "alloc_130": self.alloc_130,
                "frag_130": self.frag_130, "failed": self.failed, "pods": self.pods,
                "seconds": round(self.seconds, 3), "cpu_seconds": round(self.cpu_seconds, 3)}


def parse_seeds(text: str) -> list[int]:
    """``"42-51"`` or ``"42,43,44"`` (or a mix) -> sorted list of seeds."""
    seeds: set[int] = set()
    for part in filter(None, re.split(r"[,\s]+", text)):
        if "-" in part:
            lo, hi = part.split("-", 1)
            seeds.update(range(int(lo), int(hi) + 1))
        else:
            seeds.add(int(part))
    return sorted(seeds)


class WorkloadContext:
    """Per-workload inputs loaded once: hosts, target distribution, the fragmentation metric."""

    def __init__(self, workload: str, directory: Path | None = None):
        self.workload = workload
        self.directory = directory
        self.nodes = trace.load_nodes(directory)
        self.distribution = PodTypeDistribution.from_requests(trace.load_workload_pods(workload, directory))
        self.metric = FragModel(self.distribution)

    def run(self, policy_name: str, seed: int, export_dir: Path | None = None, *,
            tie_seed: int | None = None) -> tuple[ReplaySummary, ReplayResult]:
        """Replay sequence ``seed`` with ``policy_name``; ``tie_seed`` (default ``seed``) seeds the tie order."""
        pods = trace.load_sequence(self.workload, seed, self.directory)
        ties = seed if tie_seed is None else tie_seed
        policy = get_policy(policy_name, distribution=self.distribution, seed=ties)
        frag = getattr(policy, "frag", None)
        if not isinstance(frag, FragModel):
            frag = self.metric
        result = replay(self.nodes, pods, policy, frag, seed=seed, workload=self.workload, tie_seed=ties)
        if export_dir is not None:
            export_placements(result, self.nodes, pods, Path(export_dir) / policy_name
                              / f"{self.workload}-seed{seed}.jsonl")
        alloc, frag_curve = result.curve("alloc"), result.curve("frag")
        summary = ReplaySummary(self.workload, policy_name, seed, alloc.get(130, float("nan")),
                                frag_curve.get(130, float("nan")), result.failed, len(pods), result.seconds,
                                result.cpu_seconds, alloc, frag_curve, tie_seed=ties)
        return summary, result


def run_grid(workloads: Iterable[str], policies: Iterable[str], seeds: Iterable[int], *,
             directory: Path | None = None, export_dir: Path | None = None,
             progress: Callable[[ReplaySummary], None] | None = None) -> list[ReplaySummary]:
    out = []
    policies, seeds = list(policies), list(seeds)
    for workload in workloads:
        ctx = WorkloadContext(workload, directory)
        for policy in policies:
            for seed in seeds:
                summary, _ = ctx.run(policy, seed, export_dir)
                out.append(summary)
                if progress:
                    progress(summary)
    return out
