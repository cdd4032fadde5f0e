"""``ours``: FGD, with its ties broken by the capacity a host keeps for the target workload.

Idea and measurements: docs/adr/0300-packing-policy-ours.md and docs/packing-results.md.

FGD's integer score ``int(sigmoid(dF / 1000) * 100)`` puts most hosts into a few score classes: a CPU-only pod
that does not push a host under any typical request's CPU scores exactly 50 everywhere, and so does a whole GPU
taken from a host whose other GPUs stay usable. FGD then falls back to an arbitrary host order. Its
fragmentation measure also asks only whether *one* copy of each typical request still fits a host, so it cannot
see that the CPU left must feed *all* the free GPUs (G2 hosts have 12 cores per GPU, and a typical whole-GPU pod
asks 11-19 cores), nor that a GPU holds a whole number of copies of a share (two 470s leave 60 unusable).

``ours`` keeps FGD's score as the primary key (so it never ranks a host FGD considers worse above one it
considers better) and breaks its ties with the change of the host's *supported capacity*:

    C_h = sum over GPU request shapes t of the target workload:
          count_t * gpu_milli_t * num_gpu_t * min(GPU copies_t(h), floor(cpu_free_h / cpu_milli_t))

    GPU copies_t(h) = floor(sum over GPUs g of floor(free_g / gpu_milli_t) / num_gpu_t)   (model allowed, else 0)

i.e. how much of the typical demand the host could still serve if it received only copies of that shape. The
final score is ``fgd_score * 2**40 + (C_h after - C_h before)`` (an integer; higher is better); remaining ties go
to the host rank like every policy. Cost per decision: FGD's plus O(T) per candidate (T = number of typical GPU
shapes, 30-130 in the openb workloads), with the per-host state kept current incrementally.
"""
from __future__ import annotations

import numpy as np

from .base import MILLI, NodeBatch, PodRequest, model_allowed
from .fgd import FgdPolicy, best_per_row, sigmoid_score
from .fragmentation import PodTypeDistribution, take_least_sufficient

PRIMARY_SHIFT = 2**40
SECONDARY_LIMIT = 2**39 - 1


class CapacityModel:
    """Supported capacity C_h of hosts for a target workload (integers: count * milli)."""

    def __init__(self, dist: PodTypeDistribution):
        shapes = [(t, c) for t, c in zip(dist.types, dist.counts, strict=True) if t.is_gpu]
        self.thresholds = np.array(sorted({t.gpu_milli for t, _ in shapes}) or [MILLI], dtype=np.int64)
        self.m_pos = np.array([int(np.searchsorted(self.thresholds, t.gpu_milli)) for t, _ in shapes],
                              dtype=np.int64)
        self.num_gpu = np.array([t.num_gpu for t, _ in shapes], dtype=np.int64)
        self.cpu = np.array([max(t.cpu_milli, 1) for t, _ in shapes], dtype=np.int64)
        self.value_per_copy = np.array([c * t.gpu_milli * t.num_gpu for t, c in shapes], dtype=np.int64)
        self.specs = [t.gpu_spec for t, _ in shapes]
        self._weights: dict[tuple, np.ndarray] = {}

    def weights(self, models: list[str]) -> np.ndarray:
        """int64[len(models), T]: value of one copy of shape t on a host of each model (0: not allowed)."""
        key = tuple(models)
        w = self._weights.get(key)
        if w is None:
            allowed = np.array([[bool(m) and model_allowed(m, s) for s in self.specs] for m in models], dtype=bool)
            w = allowed.reshape(len(models), len(self.specs)) * self.value_per_copy
            self._weights[key] = w
        return w

    def gpu_copies(self, gpu: np.ndarray) -> np.ndarray:
        """q[..., M]: per threshold m, sum over GPUs of floor(free / m)."""
        return (np.where(gpu > 0, gpu, 0)[..., None] // self.thresholds).sum(axis=-2)

    def capacity(self, batch: NodeBatch, model_idx, cpu_free, q) -> np.ndarray:
        copies = np.minimum(q[..., self.m_pos] // self.num_gpu, cpu_free[..., None] // self.cpu)
        return (copies * self.weights(batch.models)[model_idx]).sum(axis=-1)

    def host_state(self, batch: NodeBatch) -> tuple[np.ndarray, np.ndarray]:
        """(q[N, M], C[N]) kept current by the batch across placements."""
        return batch.derived(("capacity", id(self)), self._compute_rows)

    def _compute_rows(self, batch: NodeBatch, rows: np.ndarray):
        q = self.gpu_copies(batch.gpu_free[rows])
        return q, self.capacity(batch, batch.model_idx[rows], batch.cpu_free[rows], q)


class OursPolicy(FgdPolicy):
    name = "ours"

    def __init__(self, distribution: PodTypeDistribution):
        super().__init__(distribution)
        self.cap = CapacityModel(distribution)

    def score_rows(self, batch: NodeBatch, req: PodRequest, rows: np.ndarray):
        f_old = self.frag.host_state(batch)[3]
        q, c_old = self.cap.host_state(batch)
        if req.is_share:
            pos, gj, f_new = self.frag.after_share(batch, rows, req)
            r = rows[pos]
            a = batch.gpu_free[r, gj]
            q2 = q[r] - a[:, None] // self.cap.thresholds + (a - req.gpu_milli)[:, None] // self.cap.thresholds
            c_new = self.cap.capacity(batch, batch.model_idx[r], batch.cpu_free[r] - req.cpu_milli, q2)
            score = combine(sigmoid_score(f_old[r] - f_new, self.frag.total), c_new - c_old[r])
            return best_per_row(len(rows), pos, gj, score)
        f_new = self.frag.after_whole(batch, rows, req)
        if not req.is_gpu:
            q2 = q[rows]
        elif req.gpu_milli == MILLI:
            q2 = q[rows] - req.num_gpu * (MILLI // self.cap.thresholds)
        else:
            q2 = self.cap.gpu_copies(take_least_sufficient(batch.gpu_free[rows], req))
        c_new = self.cap.capacity(batch, batch.model_idx[rows], batch.cpu_free[rows] - req.cpu_milli, q2)
        score = combine(sigmoid_score(f_old[rows] - f_new, self.frag.total), c_new - c_old[rows])
        return score, np.full(len(rows), -1, dtype=np.int64)


def combine(primary: np.ndarray, capacity_change: np.ndarray) -> np.ndarray:
    return primary * PRIMARY_SHIFT + np.clip(capacity_change, -SECONDARY_LIMIT, SECONDARY_LIMIT)
