"""``ours``: FGD, protected multi-GPU hosts first, FGD's ties broken by the capacity a host keeps.

Sources: FGD (Weng et al., "Beware of Fragmentation", USENIX ATC 2023) for the primary measure; our ADRs
docs/adr/0300-packing-policy-ours.md (capacity tie-break) and 0302 (reserve key, memory); figures in
docs/packing-results.md.

Idea. FGD places a request where the host's fragmentation against the target workload ("typical pods") grows
least, scored ``int(sigmoid(dF / 1000) * 100)``. It has two blind spots that ``ours`` fixes with two extra keys:

* FGD's typical pods are cut at 95 % of the requests by count, which on the openb workloads drops every
  multi-GPU shape: nothing protects the hosts that still have n fully free GPUs, FGD breaks the last of them
  and later refuses every n-GPU pod. The **reserve key**, ranked before FGD's score, counts for how many
  *scarce* multi-GPU groups a placement would take away a host that can still run one.
* FGD's score is coarse (most CPU-only pods, and whole GPUs taken from hosts whose other GPUs stay usable, all
  score 50) and asks only whether *one* copy of each typical request fits. The **capacity tie-break** ranks
  FGD's ties by the change of the host's supported capacity (copies of the typical requests it can still
  take, limited by GPU granularity, CPU and memory).

Keys (higher wins; an integer ``reserve * 2**48 + fgd * 2**40 + clip(capacity change, +-(2**39 - 1))``; ties
go to the host rank like every policy):

1. reserve = -(number of scarce groups n for which the host is *able* now and not after the placement).
   Groups come from :attr:`PodTypeDistribution.multi_gpu` (whole-GPU requests of n >= 2 GPUs, from all
   requests): ``share_n`` of the requested GPU milli, median CPU ``cpu_n``. A host is able for n when it has
   at least n fully free GPUs and ``cpu_n`` free CPU. Group n is scarce when the able hosts of the whole batch
   number at most ``RESERVE_FACTOR * share_n * free_total / (n * 1000)`` (free_total: all free GPU milli),
   i.e. no more than the group's share of what is still free would need. 0 when no group is scarce.
2. FGD's integer score (a share: for the GPU FGD picks on that host, so the reserve is evaluated per
   (host, GPU) candidate).
3. capacity change ``C_h after - C_h before``, with

       C_h = sum over GPU shapes t of the typical pods: count_t * min(GPU copies_t(h),
             floor(cpu_free_h / cpu_milli_t), floor(mem_free_h / memory_t))
       GPU copies_t(h) = floor(sum over GPUs g of floor(free_g / gpu_milli_t) / num_gpu_t)  (model allowed, else 0)

   (memory_t: the shape's median memory; 0 = no memory limit.)

Cost per decision: FGD's O(H x (G x M + T)) for H feasible hosts, G GPUs per host, M distinct share sizes;
O(K x N) for the scarcity test over all N hosts and K multi-GPU groups (K = 3 on openb: 2, 4, 8 GPUs); O(T) per candidate
for the capacity change (T typical GPU shapes, 30-130 on openb), only for candidates tied on the first two
keys. Per-host state (copies per share size, capacity, fully free GPUs, free milli) is kept current
incrementally by the batch.
"""
from __future__ import annotations

import numpy as np

from .base import MILLI, NodeBatch, Placement, PodRequest, model_allowed
from .fgd import FgdPolicy, best_per_row, sigmoid_score
from .fragmentation import PodTypeDistribution, take_least_sufficient

RESERVE_SHIFT = 2**48
PRIMARY_SHIFT = 2**40
SECONDARY_LIMIT = 2**39 - 1
RESERVE_FACTOR = 1.0  # group n is scarce when able hosts <= RESERVE_FACTOR * share_n * free milli / (n * 1000)
RESERVE_MIN = -127  # the reserve key's floor: keeps every score inside int64
NO_LIMIT = 2**40  # copies "allowed" by an unknown memory size


class CapacityModel:
    """Supported capacity C_h of hosts for a target workload (integer: copies weighted by shape counts)."""

    def __init__(self, dist: PodTypeDistribution):
        memory = dist.memory_mib or (0,) * len(dist.types)
        shapes = [(t, c, m) for t, c, m in zip(dist.types, dist.counts, memory, strict=True) if t.is_gpu]
        self.thresholds = np.array(sorted({t.gpu_milli for t, _, _ in shapes}) or [MILLI], dtype=np.int64)
        self.m_pos = np.array([int(np.searchsorted(self.thresholds, t.gpu_milli)) for t, _, _ in shapes],
                              dtype=np.int64)
        self.num_gpu = np.array([t.num_gpu for t, _, _ in shapes], dtype=np.int64)
        self.cpu = np.array([max(t.cpu_milli, 1) for t, _, _ in shapes], dtype=np.int64)
        mem = np.array([m for _, _, m in shapes], dtype=np.int64)
        self.value_per_copy = np.array([c for _, c, _ in shapes], dtype=np.int64)  # a copy weighs its count
        self.specs = [t.gpu_spec for t, _, _ in shapes]
        self._multi = np.flatnonzero(self.num_gpu > 1)
        self._inv_cpu = 1.0 / self.cpu
        self._mem_limited = bool((mem > 0).any())
        self._inv_mem = np.where(mem > 0, 1.0 / np.maximum(mem, 1), 0.0)
        self._mem_unlimited = np.where(mem > 0, 0, NO_LIMIT)
        self._weights: dict[tuple, np.ndarray] = {}

    def weights(self, models: list[str]) -> np.ndarray:
        """int64[len(models), T]: value of one copy of shape t on a host of each model (0: not allowed)."""
        key = tuple(models)
        w = self._weights.get(key)
        if w is None:
            allowed = np.array([[model_allowed(m, s) for s in self.specs] for m in models], dtype=bool)
            w = allowed.reshape(len(models), len(self.specs)) * self.value_per_copy
            self._weights[key] = w
        return w

    def gpu_copies(self, gpu: np.ndarray) -> np.ndarray:
        """q[..., M]: per threshold m, sum over GPUs of floor(free / m)."""
        return (np.where(gpu > 0, gpu, 0)[..., None] // self.thresholds).sum(axis=-2)

    def capacity(self, batch: NodeBatch, model_idx, cpu_free, mem_free, q) -> np.ndarray:
        copies = q[..., self.m_pos]
        if self._multi.size:
            copies[..., self._multi] //= self.num_gpu[self._multi]
        # floor(x / c) exactly: (x + 0.5) / c stays >= 0.5 / c away from the next integer
        copies = np.minimum(copies, np.floor((cpu_free[..., None] + 0.5) * self._inv_cpu).astype(np.int64))
        if self._mem_limited:
            by_mem = np.floor((np.maximum(mem_free, 0)[..., None] + 0.5) * self._inv_mem).astype(np.int64)
            copies = np.minimum(copies, by_mem + self._mem_unlimited)
        return (copies * self.weights(batch.models)[model_idx]).sum(axis=-1)

    def host_state(self, batch: NodeBatch) -> tuple[np.ndarray, np.ndarray]:
        """(q[N, M], C[N]) kept current by the batch across placements."""
        return batch.derived(("capacity", id(self)), self._compute_rows)

    def _compute_rows(self, batch: NodeBatch, rows: np.ndarray):
        q = self.gpu_copies(batch.gpu_free[rows])
        return q, self.capacity(batch, batch.model_idx[rows], batch.cpu_free[rows], batch.mem_free[rows], q)


class ReserveModel:
    """The reserve key: which multi-GPU groups are scarce, and which placements take away an able host."""

    def __init__(self, dist: PodTypeDistribution, factor: float = RESERVE_FACTOR):
        groups = [(n, share, cpu) for n, share, cpu in dist.multi_gpu if share > 0]
        self.n = np.array([g[0] for g in groups], dtype=np.int64)
        self.share = np.array([g[1] for g in groups], dtype=np.float64)
        self.cpu = np.array([g[2] for g in groups], dtype=np.int64)
        self.factor = factor

    def host_state(self, batch: NodeBatch) -> tuple[np.ndarray, np.ndarray]:
        """(fully free GPUs[N], free GPU milli[N]) kept current by the batch across placements."""
        return batch.derived(("reserve", id(self)), self._compute_rows)

    @staticmethod
    def _compute_rows(batch: NodeBatch, rows: np.ndarray):
        gpu = batch.gpu_free[rows]
        return (gpu == MILLI).sum(axis=1), np.where(gpu > 0, gpu, 0).sum(axis=1)

    def scarce(self, batch: NodeBatch) -> np.ndarray:
        """Indices of the scarce groups now (empty when none)."""
        if self.n.size == 0:
            return self.n
        full, free = self.host_state(batch)
        able = (full[None, :] >= self.n[:, None]) & (batch.cpu_free[None, :] >= self.cpu[:, None])
        need = self.factor * self.share * float(free.sum()) / (self.n * MILLI)
        return np.flatnonzero(able.sum(axis=1) <= need)

    def key(self, batch: NodeBatch, req: PodRequest, r: np.ndarray, gj: np.ndarray | None,
            scarce: np.ndarray) -> np.ndarray:
        """int64[len(r)]: minus the scarce groups host ``r`` is able for now and not after the placement
        (``gj``: the GPU of each share candidate)."""
        if scarce.size == 0 or r.size == 0:
            return np.zeros(len(r), dtype=np.int64)
        full = self.host_state(batch)[0][r]
        if req.is_share:
            taken = (batch.gpu_free[r, gj] == MILLI).astype(np.int64)
        elif not req.is_gpu:
            taken = 0
        elif req.gpu_milli == MILLI:
            taken = req.num_gpu
        else:
            taken = full - (take_least_sufficient(batch.gpu_free[r], req) == MILLI).sum(axis=1)
        n, cpu = self.n[scarce][:, None], self.cpu[scarce][:, None]
        cpu_free = batch.cpu_free[r][None, :]
        now = (full[None, :] >= n) & (cpu_free >= cpu)
        after = ((full - taken)[None, :] >= n) & (cpu_free - req.cpu_milli >= cpu)
        return np.maximum(-(now & ~after).sum(axis=0), RESERVE_MIN).astype(np.int64)


class OursPolicy(FgdPolicy):
    name = "ours"

    def __init__(self, distribution: PodTypeDistribution):
        super().__init__(distribution)
        self.cap = CapacityModel(distribution)
        self.reserve = ReserveModel(distribution)

    # The score is (reserve, FGD score, capacity change); the capacity change only matters among candidates
    # that tie on the first two keys, so `place` computes it for those alone (same choice as the full score).
    def _primary(self, batch: NodeBatch, req: PodRequest, rows: np.ndarray):
        """reserve * 2**48 + FGD score * 2**40: per share candidate (pos, gpu, key) or per row (None, None, key)."""
        f_old = self.frag.host_state(batch)[3]
        scarce = self.reserve.scarce(batch)
        if req.is_share:
            pos, gj, f_new = self.frag.after_share(batch, rows, req)
            fgd = sigmoid_score(f_old[rows[pos]] - f_new, self.frag.total)
            return pos, gj, combine_primary(self.reserve.key(batch, req, rows[pos], gj, scarce), fgd)
        f_new = self.frag.after_whole(batch, rows, req)
        fgd = sigmoid_score(f_old[rows] - f_new, self.frag.total)
        return None, None, combine_primary(self.reserve.key(batch, req, rows, None, scarce), fgd)

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
        c_new = self.cap.capacity(batch, batch.model_idx[r], batch.cpu_free[r] - req.cpu_milli,
                                  batch.mem_free[r] - req.memory_mib, q2)
        return c_new - c_old[r]

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


def combine_primary(reserve: np.ndarray, fgd_score: np.ndarray) -> np.ndarray:
    return reserve.astype(np.int64) * RESERVE_SHIFT + fgd_score.astype(np.int64) * PRIMARY_SHIFT


def combine(primary: np.ndarray, capacity_change: np.ndarray) -> np.ndarray:
    return primary + np.clip(capacity_change, -SECONDARY_LIMIT, SECONDARY_LIMIT)
