"""FGD: Fragmentation Gradient Descent (Weng et al., USENIX ATC 2023).

Place the request where the host's fragmentation against the target workload grows least. As in the
published artifact, the integer score is ``int(sigmoid((F_before - F_after) / 1000) * 100)`` (F in milli-GPU,
see :mod:`.fragmentation`); a share goes to the GPU with the best score on that host (lowest index on ties);
whole GPUs are the lowest-indexed free ones.
"""
from __future__ import annotations

import numpy as np

from .base import NodeBatch, PodRequest
from .fragmentation import FragModel, PodTypeDistribution
from .policy import Policy, no_share


def sigmoid_score(delta_scaled: np.ndarray, total: int) -> np.ndarray:
    """``int(sigmoid(delta / 1000) * 100)`` for ``delta = delta_scaled / total`` milli-GPU."""
    x = delta_scaled / total / 1000.0
    return (1.0 / (1.0 + np.exp(-x)) * 100.0).astype(np.int64)


def best_per_row(n_rows: int, pos: np.ndarray, gpu: np.ndarray, score: np.ndarray):
    """Per row: the highest candidate score and its GPU (lowest index on ties); rows without a candidate get
    the int64 minimum and GPU -1. Candidates: row positions ``pos``, GPU indices ``gpu``, scores ``score``."""
    best = np.full(n_rows, np.iinfo(np.int64).min, dtype=np.int64)
    best_gpu = np.full(n_rows, -1, dtype=np.int64)
    if len(pos):
        order = np.lexsort((gpu, -score, pos))  # by row, then best score, then lowest GPU index
        p = pos[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = p[1:] != p[:-1]
        sel = order[first]
        best[pos[sel]] = score[sel]
        best_gpu[pos[sel]] = gpu[sel]
    return best, best_gpu


class FgdPolicy(Policy):
    name = "fgd"

    def __init__(self, distribution: PodTypeDistribution):
        self.frag = FragModel(distribution)

    def score_rows(self, batch: NodeBatch, req: PodRequest, rows: np.ndarray):
        f_old = self.frag.host_state(batch)[3][rows]
        if req.is_share:
            pos, gj, f_new = self.frag.after_share(batch, rows, req)
            return best_per_row(len(rows), pos, gj, sigmoid_score(f_old[pos] - f_new, self.frag.total))
        f_new = self.frag.after_whole(batch, rows, req)
        return sigmoid_score(f_old - f_new, self.frag.total), no_share(rows)
