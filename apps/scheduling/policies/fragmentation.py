"""FGD's fragmentation measure against a target workload, computed exactly in integers.

Source of the rule: Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
Gradient Descent", USENIX ATC 2023, Sec. 4 (task-type distribution, per-node fragmentation F_n(M) as the expected
unusable GPU milli over the workload's task types). The behaviour of the published artifact
(hkust-adsl/kubernetes-scheduler-simulator, read for facts only) that we reproduce:

* the target workload ("typical pods") is the workload's request shapes ``(cpu_milli, gpu_milli, num_gpu,
  gpu_spec)`` counted over the whole pod list (CPU-only pods included), most frequent first (ties: larger
  shape first), cut as soon as the cumulative count reaches 95 % of the pods, then renormalised;
* for one host and one task type t the fragment is all of the host's free GPU milli when t cannot run there
  (CPU-only type, model not allowed, too little CPU, fewer than ``num_gpu`` GPUs with ``gpu_milli`` free), and
  otherwise the free milli of the GPUs that each have less than ``gpu_milli`` free; memory is not considered;
* F_n = sum over types of p_t * fragment_t.

Rewritten with U_m = sum of the free milli of GPUs with at least m free, and cnt_m = how many such GPUs:

    F_n = L - sum_m U_m * W[m, model, cnt_m, cpu_free],   W = sum of p_t over GPU types t with gpu_milli == m,
                                                          model allowed, num_gpu <= cnt_m, cpu_milli <= cpu_free

so one host costs O(#distinct gpu_milli) to evaluate and a candidate placement only changes the terms of the
one GPU it touches. We keep the type weights as integer counts, so F * total_count is an exact integer and a
placement that changes nothing has a change of exactly 0 (FGD's sigmoid then gives exactly 50).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from .base import MILLI, NO_GPU, NodeBatch, PodRequest, model_allowed

DEFAULT_POPULARITY = 0.95


@dataclass(frozen=True, slots=True, order=True)
class PodType:
    """A request shape of the target workload."""

    cpu_milli: int
    gpu_milli: int
    num_gpu: int
    gpu_spec: str

    @property
    def is_gpu(self) -> bool:
        return self.gpu_milli > 0 and self.num_gpu > 0


@dataclass(frozen=True)
class PodTypeDistribution:
    """The target workload: shapes with integer counts (``p_t = count_t / total``).

    Two optional summaries that FGD ignores and ``ours`` uses (both from the *full* request list, before the
    popularity cut):

    * ``memory_mib[i]``: median ``memory_mib`` of the requests of shape ``types[i]`` (empty or 0: unknown, no
      memory limit);
    * ``multi_gpu``: ``(n, share, cpu_milli)`` per whole-GPU multi-GPU group (``num_gpu == n >= 2``,
      ``gpu_milli == 1000``, any model and CPU): the group's share of all requested GPU milli and the median
      CPU of its requests. FGD's 95 % cut drops these shapes on most openb workloads.
    """

    types: tuple[PodType, ...]
    counts: tuple[int, ...]
    memory_mib: tuple[int, ...] = ()
    multi_gpu: tuple[tuple[int, float, int], ...] = ()

    @property
    def total(self) -> int:
        return sum(self.counts)

    @classmethod
    def from_requests(cls, requests: Iterable[PodRequest],
                      popularity: float = DEFAULT_POPULARITY) -> PodTypeDistribution:
        """Most popular shapes covering ``popularity`` of the requests (FGD's typical pods, step 1), with the
        per-shape median memory and the multi-GPU groups of all requests."""
        memory: dict[PodType, list[int]] = defaultdict(list)
        multi_cpu: dict[int, list[int]] = defaultdict(list)
        gpu_milli_total = 0
        for r in requests:
            memory[PodType(r.cpu_milli, r.gpu_milli if r.num_gpu else 0, r.num_gpu, r.gpu_spec)].append(
                r.memory_mib)
            if r.is_gpu:
                gpu_milli_total += r.total_gpu_milli
                if r.num_gpu >= 2 and r.gpu_milli == MILLI:
                    multi_cpu[r.num_gpu].append(r.cpu_milli)
        counter = Counter({shape: len(mems) for shape, mems in memory.items()})
        if not counter:
            raise ValueError("empty workload")
        n = sum(counter.values())
        ordered = sorted(counter.items(), key=lambda kv: (kv[1], kv[0].cpu_milli, kv[0].gpu_milli,
                                                          kv[0].num_gpu, kv[0].gpu_spec), reverse=True)
        expected = popularity * 100 * n / 100.0
        cum, chosen = 0, []
        for shape, count in ordered:
            if cum >= expected:
                break
            chosen.append((shape, count))
            cum += count
        multi = tuple((g, len(cpus) * g * MILLI / gpu_milli_total, int(np.median(cpus)))
                      for g, cpus in sorted(multi_cpu.items()))
        return cls(types=tuple(s for s, _ in chosen), counts=tuple(c for _, c in chosen),
                   memory_mib=tuple(int(np.median(memory[s])) for s, _ in chosen), multi_gpu=multi)


class FragModel:
    """Evaluates F_n for hosts of a :class:`NodeBatch` and for candidate placements on them.

    All values are ``F * total`` (exact int64); divide by :attr:`total` for milli-GPU.
    """

    def __init__(self, dist: PodTypeDistribution):
        self.dist = dist
        self.total = dist.total
        gpu_types = [(t, c) for t, c in zip(dist.types, dist.counts, strict=True) if t.is_gpu]
        self._gpu_types = gpu_types
        self.thresholds = np.array(sorted({t.gpu_milli for t, _ in gpu_types}) or [MILLI], dtype=np.int64)
        self.cpu_levels = np.array(sorted({t.cpu_milli for t, _ in gpu_types}), dtype=np.int64)
        self._tables: dict[tuple, np.ndarray] = {}
        self._m_index = np.arange(len(self.thresholds))

    # ---- tables ---------------------------------------------------------------------------------------
    def table(self, models: list[str], width: int) -> np.ndarray:
        """int64[M, len(models), width+1, len(cpu_levels)+1]: the W of the module docstring."""
        key = (tuple(models), width)
        tab = self._tables.get(key)
        if tab is not None:
            return tab
        tab = np.zeros((len(self.thresholds), len(models), width + 1, len(self.cpu_levels) + 1), np.int64)
        m_pos = {int(m): i for i, m in enumerate(self.thresholds)}
        for t, count in self._gpu_types:
            if t.num_gpu > width:
                continue
            ci = int(np.searchsorted(self.cpu_levels, t.cpu_milli, side="left")) + 1
            for mo, model in enumerate(models):
                if model_allowed(model, t.gpu_spec):
                    tab[m_pos[t.gpu_milli], mo, t.num_gpu:, ci:] += count
        self._tables[key] = tab
        return tab

    def cpu_index(self, cpu_free: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.cpu_levels, cpu_free, side="right")

    # ---- host features --------------------------------------------------------------------------------
    def features(self, gpu: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For GPU rows ``gpu[..., G]``: (U[..., M], cnt[..., M], L[...])."""
        ge = gpu[..., None] >= self.thresholds
        u = (gpu[..., None] * ge).sum(axis=-2)
        cnt = ge.sum(axis=-2)
        free = np.where(gpu > 0, gpu, 0).sum(axis=-1)
        return u, cnt, free

    def value(self, tab, model_idx, cpu_free, u, cnt, free) -> np.ndarray:
        """F * total for hosts (or candidates) given their features; leading shapes broadcast."""
        _, n_models, n_cnt, n_cpu = tab.shape
        base = (model_idx * n_cnt) * n_cpu + self.cpu_index(cpu_free)
        idx = cnt * n_cpu + (base[..., None] + self._m_index * (n_models * n_cnt * n_cpu))
        w = tab.ravel().take(idx)
        return free * self.total - (u * w).sum(axis=-1)

    def host_state(self, batch: NodeBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(U[N, M], cnt[N, M], L[N], F*total[N]) kept current by the batch across placements."""
        return batch.derived(("fgd-frag", id(self)), self._compute_rows)

    def _compute_rows(self, batch: NodeBatch, rows: np.ndarray):
        tab = self.table(batch.models, batch.gpu_free.shape[1])
        u, cnt, free = self.features(batch.gpu_free[rows])
        f = self.value(tab, batch.model_idx[rows], batch.cpu_free[rows], u, cnt, free)
        return u, cnt, free, f

    # ---- candidate placements -------------------------------------------------------------------------
    def after_share(self, batch: NodeBatch, rows: np.ndarray, req: PodRequest):
        """F*total after placing a fractional share, per candidate GPU.

        Returns (cand_row_pos, cand_gpu, F[C]): candidates in row-major order, one per distinct free value
        of a row (equal values give equal results; the lowest index represents them).
        """
        u, cnt, free, _ = self.host_state(batch)
        tab = self.table(batch.models, batch.gpu_free.shape[1])
        a_all = batch.gpu_free[rows]
        width = a_all.shape[1]
        earlier = np.tri(width, width, -1, dtype=bool)  # earlier[j, i]: GPU i comes before GPU j
        dup = ((a_all[:, :, None] == a_all[:, None, :]) & earlier).any(axis=2)
        pos, gj = np.nonzero((a_all >= req.gpu_milli) & ~dup)
        a = a_all[pos, gj]
        r = rows[pos]
        a2 = a - req.gpu_milli
        th = self.thresholds
        old_ge = a[:, None] >= th
        new_ge = a2[:, None] >= th
        u2 = u[r] - a[:, None] * old_ge + a2[:, None] * new_ge
        c2 = cnt[r] - old_ge + new_ge
        f = self.value(tab, batch.model_idx[r], batch.cpu_free[r] - req.cpu_milli, u2, c2,
                       free[r] - req.gpu_milli)
        return pos, gj, f

    def after_whole(self, batch: NodeBatch, rows: np.ndarray, req: PodRequest) -> np.ndarray:
        """F*total after placing a CPU-only or whole/multi-GPU request (GPUs chosen least-sufficient first)."""
        u, cnt, free, _ = self.host_state(batch)
        tab = self.table(batch.models, batch.gpu_free.shape[1])
        cpu2 = batch.cpu_free[rows] - req.cpu_milli
        if not req.is_gpu:
            return self.value(tab, batch.model_idx[rows], cpu2, u[rows], cnt[rows], free[rows])
        if req.gpu_milli == MILLI:  # takes fully free GPUs: each counted in every U_m and cnt_m
            k = req.num_gpu
            return self.value(tab, batch.model_idx[rows], cpu2, u[rows] - k * MILLI, cnt[rows] - k,
                              free[rows] - k * MILLI)
        gpu2 = take_least_sufficient(batch.gpu_free[rows], req)
        u2, c2, free2 = self.features(gpu2)
        return self.value(tab, batch.model_idx[rows], cpu2, u2, c2, free2)


def take_least_sufficient(gpu: np.ndarray, req: PodRequest) -> np.ndarray:
    """Copy of ``gpu[R, G]`` with ``gpu_milli`` taken from the ``num_gpu`` least sufficient GPUs per row."""
    out = gpu.copy()
    key = np.where(gpu >= req.gpu_milli, gpu, np.iinfo(np.int64).max)
    order = np.argsort(key, axis=1, kind="stable")[:, : req.num_gpu]
    np.subtract.at(out, (np.arange(len(gpu))[:, None], order), req.gpu_milli)
    out[gpu == NO_GPU] = NO_GPU
    return out
