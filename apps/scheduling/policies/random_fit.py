"""Random: a uniformly random feasible host, a uniformly random sufficient GPU for shares.

Baseline "Random" of the FGD paper (USENIX ATC 2023, Sec. 6.1): one feasible host scores 100, the rest 0.
"""
from __future__ import annotations

import numpy as np

from .base import NodeBatch, PodRequest
from .policy import Policy, no_share


class RandomPolicy(Policy):
    name = "random"

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def score_rows(self, batch: NodeBatch, req: PodRequest, rows: np.ndarray):
        scores = np.zeros(len(rows), dtype=np.int64)
        scores[self.rng.integers(len(rows))] = 100
        if not req.is_share:
            return scores, no_share(rows)
        keys = np.where(batch.gpu_free[rows] >= req.gpu_milli, self.rng.random(batch.gpu_free[rows].shape), -1.0)
        return scores, keys.argmax(axis=1)
