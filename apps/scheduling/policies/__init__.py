"""Packing policies: score (host, request) pairs with integers, highest wins. See docs/placement-simulator.md.

``get_policy(name, distribution=...)`` builds one of :data:`POLICY_NAMES`; ``ours`` is the product default for
fractional shares, MIG slices and vGPUs alike (`apps.scheduling.placement.weighers.policy_scores`; MIG profiles
and vGPU types sized in milli-GPU by `apps.scheduling.placement.fractional`; see
docs/adr/0300-packing-policy-ours.md).
"""
from __future__ import annotations

from .base import MAX_PODS_PER_NODE, MILLI, NodeBatch, NodeView, Placement, PodRequest
from .best_fit import BestFitPolicy
from .fgd import FgdPolicy
from .fragmentation import FragModel, PodType, PodTypeDistribution
from .policy import Policy
from .random_fit import RandomPolicy

POLICY_NAMES = ("random", "best-fit", "fgd", "ours")
DEFAULT_POLICY = "ours"


def get_policy(name: str, *, distribution: PodTypeDistribution | None = None, seed: int = 0) -> Policy:
    """A fresh policy object. ``fgd`` and ``ours`` need the target workload's ``distribution``."""
    if name == "random":
        return RandomPolicy(seed)
    if name in ("best-fit", "bestfit"):
        return BestFitPolicy()
    if name in ("fgd", "ours"):
        if distribution is None:
            raise ValueError(f"policy {name!r} needs the target workload's PodTypeDistribution")
        if name == "fgd":
            return FgdPolicy(distribution)
        from .ours import OursPolicy
        return OursPolicy(distribution)
    raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICY_NAMES)}")


__all__ = [
    "MAX_PODS_PER_NODE", "MILLI", "NodeBatch", "NodeView", "Placement", "PodRequest", "Policy", "PodType",
    "PodTypeDistribution", "FragModel", "RandomPolicy", "BestFitPolicy", "FgdPolicy", "get_policy",
    "POLICY_NAMES", "DEFAULT_POLICY",
]
