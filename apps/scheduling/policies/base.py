"""Value objects and the node table every packing policy scores.

Pure, in-memory domain code: no ORM, no Django. The placement service (PostgreSQL ledger) and the trace
simulator (in-memory backend) both build a :class:`NodeBatch` and call the same policy object.

Units: CPU in milli-cores (``cpu_milli``), memory in MiB (``memory_mib``), GPU in milli-GPU per device
(``gpu_milli``, 1000 = one whole GPU). GPU indices are 0-based device indices on the host.

Feasibility (the protocol published with the Alibaba GPU-sharing trace's arrival sequences): free CPU
and memory cover the request, the host keeps at most ``MAX_PODS_PER_NODE`` consumers, and for GPU requests the
host's model is allowed and ``num_gpu`` distinct GPUs each have at least ``gpu_milli`` free.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

MILLI = 1000
MAX_PODS_PER_NODE = 1001
INT64_MAX = 2**63 - 1  # every quantity lives in an int64 array; a larger one raises ValueError
NO_GPU = -1  # padding value in NodeBatch.gpu_free for hosts with fewer GPUs than the widest host


@dataclass(frozen=True, slots=True)
class PodRequest:
    """One placement request (a pod of the trace, or one host's share of a product request).

    ``gpu_milli`` is per GPU; a fractional share is ``num_gpu == 1`` and ``gpu_milli < 1000``.
    ``gpu_spec`` lists allowed GPU models separated by ``|``; empty means any model.
    """

    cpu_milli: int
    memory_mib: int
    num_gpu: int = 0
    gpu_milli: int = 0
    gpu_spec: str = ""
    name: str = ""

    def __post_init__(self):
        if self.num_gpu < 0 or self.gpu_milli < 0 or self.cpu_milli < 0 or self.memory_mib < 0:
            raise ValueError("request quantities must be >= 0")
        if max(self.num_gpu, self.cpu_milli, self.memory_mib) > INT64_MAX:
            raise ValueError(f"request quantities must fit in int64 (<= {INT64_MAX})")
        if self.gpu_milli > MILLI:
            raise ValueError("gpu_milli is per GPU and at most 1000")

    @property
    def is_gpu(self) -> bool:
        return self.num_gpu > 0 and self.gpu_milli > 0

    @property
    def is_share(self) -> bool:
        """A fractional share of one GPU (FGD's "GPU-sharing task")."""
        return self.num_gpu == 1 and 0 < self.gpu_milli < MILLI

    @property
    def total_gpu_milli(self) -> int:
        return self.num_gpu * self.gpu_milli if self.is_gpu else 0

    @property
    def allowed_models(self) -> frozenset[str]:
        return frozenset(m for m in self.gpu_spec.split("|") if m)


def model_allowed(model: str, gpu_spec: str) -> bool:
    """Whether a host of ``model`` may serve a request with ``gpu_spec``. An empty spec names no model: any GPU
    host, an empty (unknown) ``model`` included; a spec that names models never matches an empty ``model``."""
    allowed = [m for m in gpu_spec.split("|") if m]
    if not allowed:
        return True
    return bool(model) and model in allowed


@dataclass(frozen=True, slots=True)
class NodeView:
    """The free capacity of one host, as a policy sees it.

    ``gpu_free_milli[i]`` is the free milli-GPU of device ``i`` (0..1000). ``pods_free`` is how many more
    consumers the host accepts.
    """

    name: str
    model: str
    cpu_free_milli: int
    memory_free_mib: int
    gpu_free_milli: tuple[int, ...] = ()
    pods_free: int = MAX_PODS_PER_NODE


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one request lands: row in the batch, host name, GPU indices, and the policy's score."""

    row: int
    node: str
    gpus: tuple[int, ...]
    score: int


@dataclass
class NodeBatch:
    """Column arrays over N hosts; the unit every policy scores at once (numpy, one row per host).

    ``rank`` breaks ties: among equal scores the lowest rank wins (the simulator sets a random permutation
    seeded by the replay seed, as the published FGD simulator does; the product may use any stable order).
    It holds one entry per host; any other shape raises ValueError.
    Derived per-host features (e.g. FGD's fragmentation) register through :meth:`derived` and are recomputed
    for the touched row on every :meth:`apply`, so a replay never recomputes the whole fleet.
    """

    names: list[str]
    models: list[str]  # distinct model names; model_idx indexes this list
    model_idx: np.ndarray  # int64[N]
    cpu_free: np.ndarray  # int64[N] milli-cores
    mem_free: np.ndarray  # int64[N] MiB
    pods_free: np.ndarray  # int64[N]
    gpu_free: np.ndarray  # int64[N, G], NO_GPU where the host has fewer than G GPUs
    rank: np.ndarray  # int64[N]
    _derived: dict = field(default_factory=dict, repr=False)
    _spec_masks: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        if self.rank.shape != (len(self.names),):
            raise ValueError(f"rank has shape {self.rank.shape} for {len(self.names)} hosts; "
                             "give one rank per host (or none for host order)")

    # ---- construction -------------------------------------------------------------------------------
    @classmethod
    def from_views(cls, views: Sequence[NodeView], rank: Iterable[int] | None = None) -> NodeBatch:
        """One row per view, in order. Raises ValueError when a quantity (or a rank) does not fit in int64."""
        n = len(views)
        width = max(max((len(v.gpu_free_milli) for v in views), default=0), 1)
        index: dict[str, int] = {}
        model_idx = np.fromiter((index.setdefault(v.model, len(index)) for v in views), dtype=np.int64, count=n)
        pad = (NO_GPU,) * width
        try:
            gpu = np.array([(v.gpu_free_milli + pad)[:width] for v in views], dtype=np.int64).reshape(n, width)
            cpu_free = np.array([v.cpu_free_milli for v in views], dtype=np.int64)
            mem_free = np.array([v.memory_free_mib for v in views], dtype=np.int64)
            pods_free = np.array([v.pods_free for v in views], dtype=np.int64)
            ranks = np.arange(n, dtype=np.int64) if rank is None else np.asarray(list(rank), dtype=np.int64)
        except OverflowError as e:
            raise ValueError(f"host quantities and ranks must fit in int64 (<= {INT64_MAX})") from e
        return cls(
            names=[v.name for v in views],
            models=list(index),
            model_idx=model_idx,
            cpu_free=cpu_free,
            mem_free=mem_free,
            pods_free=pods_free,
            gpu_free=gpu,
            rank=ranks,
        )

    def __len__(self) -> int:
        return len(self.names)

    def view(self, row: int) -> NodeView:
        g = self.gpu_free[row]
        return NodeView(
            name=self.names[row],
            model=self.models[self.model_idx[row]],
            cpu_free_milli=int(self.cpu_free[row]),
            memory_free_mib=int(self.mem_free[row]),
            gpu_free_milli=tuple(int(x) for x in g[g != NO_GPU]),
            pods_free=int(self.pods_free[row]),
        )

    # ---- feasibility --------------------------------------------------------------------------------
    def spec_mask(self, gpu_spec: str) -> np.ndarray:
        """bool[len(models)]: which model indices a ``gpu_spec`` allows (`model_allowed`; cached per spec)."""
        mask = self._spec_masks.get(gpu_spec)
        if mask is None:
            mask = np.array([model_allowed(m, gpu_spec) for m in self.models], dtype=bool)
            self._spec_masks[gpu_spec] = mask
        return mask

    def feasible_rows(self, req: PodRequest) -> np.ndarray:
        """Row indices (ascending) of every host that can take ``req`` now."""
        ok = (self.cpu_free >= req.cpu_milli) & (self.mem_free >= req.memory_mib) & (self.pods_free > 0)
        if req.is_gpu:
            ok &= self.spec_mask(req.gpu_spec)[self.model_idx]
            ok &= (self.gpu_free >= req.gpu_milli).sum(axis=1) >= req.num_gpu
        return np.flatnonzero(ok)

    # ---- derived per-row features -------------------------------------------------------------------
    def derived(self, key, compute: Callable[[NodeBatch, np.ndarray], tuple]) -> tuple:
        """Arrays ``compute(batch, rows)`` returns for all rows, kept current across :meth:`apply`."""
        entry = self._derived.get(key)
        if entry is None:
            rows = np.arange(len(self), dtype=np.int64)
            entry = (compute, [np.array(a) for a in compute(self, rows)])
            self._derived[key] = entry
        return tuple(entry[1])

    # ---- mutation (in-memory backend only) ----------------------------------------------------------
    def apply(self, row: int, req: PodRequest, gpus: Sequence[int]) -> None:
        """Charge ``req`` to ``row`` on devices ``gpus``; raises ValueError if it does not fit."""
        if (self.cpu_free[row] < req.cpu_milli or self.mem_free[row] < req.memory_mib
                or self.pods_free[row] <= 0):
            raise ValueError(f"{req.name or 'request'} does not fit on {self.names[row]}")
        if req.is_gpu:
            if len(set(gpus)) != req.num_gpu:
                raise ValueError("need exactly num_gpu distinct GPU indices")
            for g in gpus:
                if self.gpu_free[row, g] < req.gpu_milli:
                    raise ValueError(f"GPU {g} of {self.names[row]} lacks {req.gpu_milli} milli")
            for g in gpus:
                self.gpu_free[row, g] -= req.gpu_milli
        self.cpu_free[row] -= req.cpu_milli
        self.mem_free[row] -= req.memory_mib
        self.pods_free[row] -= 1
        if self._derived:
            rows = np.array([row], dtype=np.int64)
            for compute, arrays in self._derived.values():
                for target, value in zip(arrays, compute(self, rows), strict=True):
                    target[row] = value[0]


def first_free_gpus(gpu_free_row: np.ndarray, count: int) -> tuple[int, ...]:
    """The ``count`` lowest-indexed fully free GPUs (whole-GPU requests on every policy)."""
    return tuple(int(i) for i in np.flatnonzero(gpu_free_row == MILLI)[:count])


def least_sufficient_gpus(gpu_free_row: np.ndarray, req: PodRequest) -> tuple[int, ...]:
    """``num_gpu`` GPUs with the least free milli that still fit ``gpu_milli`` (stable by index)."""
    order = np.argsort(gpu_free_row, kind="stable")
    picked = [int(i) for i in order if gpu_free_row[i] >= req.gpu_milli][: req.num_gpu]
    return tuple(sorted(picked))
