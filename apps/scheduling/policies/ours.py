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
          count_t * min(GPU copies_t(h), floor(cpu_free_h / cpu_milli_t))

    GPU copies_t(h) = floor(sum over GPUs g of floor(free_g / gpu_milli_t) / num_gpu_t)   (model allowed, else 0)

i.e. how many typical requests the host could still take if it received only copies of one shape. The
final score is ``fgd_score * 2**40 + (C_h after - C_h before)`` (an integer; higher is better); remaining ties go
to the host rank like every policy. Cost per decision: FGD's plus O(T) per candidate (T = number of typical GPU
shapes, 30-130 in the openb workloads), with the per-host state kept current incrementally.
"""
from __future__ import annotations

import numpy as np

from .base import MILLI, NodeBatch, Placement, PodRequest, model_allowed
from .fgd import FgdPolicy, best_per_row, sigmoid_score
from .fragmentation import PodTypeDistribution, take_least_sufficient

PRIMARY_SHIFT = 2**40
SECONDARY_LIMIT = 2**39 - 1


class CapacityModel:
    """Supported capacity C_h of hosts for a target workload (integer: copies weighted by shape counts)."""

    def __init__(self, dist: PodTypeDistribution):
        shapes = [(t, c) for t, c in zip(dist.types, dist.counts, strict=True) if t.is_gpu]
        self.thresholds = np.array(sorted({t.gpu_milli for t, _ in shapes}) or [MILLI], dtype=np.int64)
        self.m_pos = np.array([int(np.searchsorted(self.thresholds, t.gpu_milli)) for t, _ in shapes],
                              dtype=np.int64)
        self.num_gpu = np.array([t.num_gpu for t, _ in shapes], dtype=np.int64)
        self.cpu = np.array([max(t.cpu_milli, 1) for t, _ in shapes], dtype=np.int64)
        self.value_per_copy = np.array([c for _, c in shapes], dtype=np.int64)  # one copy weighs its shape count
        self.specs = [t.gpu_spec for t, _ in shapes]
        self._multi = np.flatnonzero(self.num_gpu > 1)
        self._inv_cpu = 1.0 / self.cpu
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
        copies = q[..., self.m_pos]
        if self._multi.size:
            copies[..., self._multi] //= self.num_gpu[self._multi]
        # floor(cpu / c) exactly: (cpu + 0.5) / c stays >= 0.5 / c away from the next integer
        by_cpu = np.floor((cpu_free[..., None] + 0.5) * self._inv_cpu).astype(np.int64)
        return (np.minimum(copies, by_cpu) * self.weights(batch.models)[model_idx]).sum(axis=-1)

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

    # The score is (FGD score, capacity change); the capacity change only matters among candidates that tie
    # on FGD's score, so `place` computes it for those alone (same choice as ranking by the full score).
    def _primary(self, batch: NodeBatch, req: PodRequest, rows: np.ndarray):
        """FGD scores: per share candidate (pos, gpu, score) or per row (None, None, score)."""
        f_old = self.frag.host_state(batch)[3]
        if req.is_share:
            pos, gj, f_new = self.frag.after_share(batch, rows, req)
            return pos, gj, sigmoid_score(f_old[rows[pos]] - f_new, self.frag.total)
        f_new = self.frag.after_whole(batch, rows, req)
        return None, None, sigmoid_score(f_old[rows] - f_new, self.frag.total)

    def _capacity_change(self, batch: NodeBatch, req: PodRequest, r: np.ndarray, gj: np.ndarray | None):
        q, c_old = self.cap.host_state(batch)
        th = self.cap.thresholds
        if req.is_share:
            a = batch.gpu_free[r, gj]
            q2 = q[r] - a[:, None] // th + (a - req.gpu_milli)[:, None] // th
        elif not req.is_gpu:
            q2 = q[r].copy()
        elif req.gpu_milli == MILLI:
            q2 = q[r] - req.num_gpu * (MILLI // th)
        else:
            q2 = self.cap.gpu_copies(take_least_sufficient(batch.gpu_free[r], req))
        return self.cap.capacity(batch, batch.model_idx[r], batch.cpu_free[r] - req.cpu_milli, q2) - c_old[r]

    def score_rows(self, batch: NodeBatch, req: PodRequest, rows: np.ndarray):
        pos, gj, primary = self._primary(batch, req, rows)
        if pos is None:
            score = combine(primary, self._capacity_change(batch, req, rows, None))
            return score, np.full(len(rows), -1, dtype=np.int64)
        score = combine(primary, self._capacity_change(batch, req, rows[pos], gj))
        return best_per_row(len(rows), pos, gj, score)

    def place(self, batch: NodeBatch, req: PodRequest) -> Placement | None:
        rows = batch.feasible_rows(req)
        if rows.size == 0:
            return None
        pos, gj, primary = self._primary(batch, req, rows)
        top = np.flatnonzero(primary == primary.max())
        if pos is None:
            cand_rows, cand_gpu = rows[top], None
        else:
            cand_rows, cand_gpu = rows[pos[top]], gj[top]
        score = combine(primary[top], self._capacity_change(batch, req, cand_rows, cand_gpu))
        best = np.flatnonzero(score == score.max())
        if best.size > 1:  # lowest rank, then (same host) lowest GPU index: candidates are row-major
            best = best[np.flatnonzero(batch.rank[cand_rows[best]] == batch.rank[cand_rows[best]].min())]
        i = int(best[0])
        row = int(cand_rows[i])
        share = int(cand_gpu[i]) if cand_gpu is not None else -1
        return Placement(row, batch.names[row], self.gpus_for(batch, row, req, share), int(score[i]))


def combine(primary: np.ndarray, capacity_change: np.ndarray) -> np.ndarray:
    return primary * PRIMARY_SHIFT + np.clip(capacity_change, -SECONDARY_LIMIT, SECONDARY_LIMIT)
