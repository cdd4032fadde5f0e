"""MIG geometry planner: validate GPU instance layouts and choose start slices, fragmentation-aware.

Pure domain code (no ORM). Rules, from the NVIDIA MIG User Guide ("Concepts", "Supported MIG Profiles" and the
`nvidia-smi mig -lgipp` placement lists in "Getting Started"), as encoded per model in `apps/inventory/catalog`:

* a GPU has `memory_slices` (8) memory slices and `compute_slices` (7) compute slices;
* a GPU instance of profile P occupies memory slices `[start, start + P.memory)` with `start` in `P.starts`;
  instances may not overlap;
* at most `P.max` instances of profile P per GPU (the `+me` media-extension profile is a singleton);
* the compute slices of all instances sum to at most `compute_slices`;
* some profile pairs need a minimum driver branch (A100: 4g + 3g only from R510).

`mig_plan()` places a requested multiset of profiles next to the GPU's current layout. Among all feasible
assignments it picks the one that keeps the most of the largest profiles still placeable afterwards
(lexicographic over profiles sorted by size, largest first); ties go to the assignment whose largest instances sit
at the highest start, which reproduces the driver's documented 3-2-1-1 example (3g@4, 2g@2, 1g@0, 1g@1). Every
rejection says which limit is hit or which slices collide. The request is all-or-nothing.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .catalog import MigProfile, MigSpec


@dataclass(frozen=True, order=True)
class Placement:
    """One GPU instance: memory slices `[start, start + size)`."""

    start: int
    size: int
    profile_id: int
    profile: str
    compute: int

    @property
    def end(self) -> int:
        return self.start + self.size

    def mask(self) -> int:
        return ((1 << self.size) - 1) << self.start

    def label(self) -> str:
        return f"{self.profile}@{self.start}"

    def as_dict(self) -> dict:
        return {"profile_id": self.profile_id, "profile": self.profile, "start": self.start, "size": self.size,
                "compute": self.compute}


@dataclass(frozen=True)
class Rejection:
    """Why a request does not fit. `code` is stable snake_case; `details` is JSON-serialisable."""

    code: str
    message: str
    details: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"code": self.code, "message": self.message, **self.details}


@dataclass(frozen=True)
class Plan:
    """Result of `mig_plan`: `placements` are the new instances (request order), `layout` the whole GPU after."""

    ok: bool
    placements: tuple[Placement, ...] = ()
    layout: tuple[Placement, ...] = ()
    removed: tuple[Placement, ...] = ()
    rejections: tuple[Rejection, ...] = ()

    @property
    def memory_slices_used(self) -> int:
        return sum(p.size for p in self.layout)

    @property
    def compute_slices_used(self) -> int:
        return sum(p.compute for p in self.layout)

    def explain(self) -> str:
        if self.ok:
            return "accepted: " + ", ".join(p.label() for p in sorted(self.layout))
        return "rejected: " + "; ".join(r.message for r in self.rejections)


def placement_for(profile: MigProfile, start: int) -> Placement:
    return Placement(start=start, size=profile.memory, profile_id=profile.id, profile=profile.name,
                     compute=profile.compute)


def _driver_major(driver_version: str | None) -> int | None:
    if not driver_version:
        return None
    head = str(driver_version).split(".", 1)[0]
    return int(head) if head.isdigit() else None


def _slices(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def _resolve(spec: MigSpec, ref) -> MigProfile | None:
    if isinstance(ref, MigProfile):
        return ref
    return spec.profile(ref)


def _as_item(item) -> tuple[object, int | None]:
    """A request item is a profile ref (id or name), `(ref, start)`, or `{"profile": ref, "start": n}`."""
    if isinstance(item, dict):
        return item.get("profile", item.get("profile_id")), item.get("start")
    if isinstance(item, tuple | list):
        return item[0], item[1]
    return item, None


def _as_placement(spec: MigSpec, item) -> Placement | Rejection:
    if isinstance(item, Placement):
        return item
    ref, start = _as_item(item)
    profile = _resolve(spec, ref)
    if profile is None:
        return Rejection("unknown_profile", f"unknown MIG profile {ref!r} for this GPU model", {"profile": ref})
    if start is None:
        return Rejection("start_required", f"layout entry {profile.name} needs a start slice",
                         {"profile": profile.name})
    return placement_for(profile, int(start))


def mig_layout_validate(spec: MigSpec, layout: Iterable, *, driver_version: str | None = None) -> list[Rejection]:
    """Check an explicit layout (instances with start slices) against every rule; [] when it is valid."""
    placements: list[Placement] = []
    problems: list[Rejection] = []
    for item in layout:
        p = _as_placement(spec, item)
        if isinstance(p, Rejection):
            problems.append(p)
        else:
            placements.append(p)
    by_id = {p.id: p for p in spec.profiles}
    occupied: dict[int, Placement] = {}
    for p in placements:
        profile = by_id.get(p.profile_id)
        if profile is None or p.start not in profile.starts:
            allowed = list(profile.starts) if profile else []
            problems.append(Rejection("start_not_allowed",
                                      f"{p.profile} cannot start at memory slice {p.start}; allowed starts {allowed}",
                                      {"profile": p.profile, "start": p.start, "allowed_starts": allowed}))
            continue
        for s in range(p.start, p.end):
            if s in occupied:
                other = occupied[s]
                shared = [x for x in range(p.start, p.end) if other.start <= x < other.end]
                problems.append(Rejection(
                    "slices_collide", f"{p.label()} collides with {other.label()} on memory slices {shared}",
                    {"instance": p.as_dict(), "with": other.as_dict(), "slices": shared}))
                break
        else:
            for s in range(p.start, p.end):
                occupied[s] = p
    problems.extend(_limit_problems(spec, Counter(p.profile_id for p in placements),
                                    sum(p.compute for p in placements), None, driver_version))
    return problems


def _limit_problems(spec: MigSpec, counts: Counter, compute: int, memory: int | None,
                    driver_version: str | None, existing: Counter | None = None) -> list[Rejection]:
    problems = []
    by_id = {p.id: p for p in spec.profiles}
    for pid, n in sorted(counts.items()):
        profile = by_id[pid]
        if n > profile.max:
            had = (existing or Counter())[pid]
            problems.append(Rejection(
                "max_instances",
                f"{profile.name} allows at most {profile.max} per GPU; the layout would have {n}"
                + (f" ({had} already present)" if had else ""),
                {"profile": profile.name, "profile_id": pid, "max": profile.max, "count": n}))
    if compute > spec.compute_slices:
        problems.append(Rejection("compute_slices",
                                  f"needs {compute} compute slices; the GPU has {spec.compute_slices}",
                                  {"needed": compute, "available": spec.compute_slices}))
    if memory is not None and memory > spec.memory_slices:
        problems.append(Rejection("memory_slices",
                                  f"needs {memory} memory slices; the GPU has {spec.memory_slices}",
                                  {"needed": memory, "available": spec.memory_slices}))
    major = _driver_major(driver_version)
    if major is not None:
        for pair, min_major in spec.min_driver_pairs:
            if all(counts[p] for p in pair) and major < min_major:
                names = sorted(by_id[p].name for p in pair)
                problems.append(Rejection(
                    "driver_too_old", f"{' + '.join(names)} on one GPU needs driver R{min_major} or newer; "
                    f"host runs {driver_version}", {"profiles": names, "min_driver_major": min_major,
                                                    "driver_version": driver_version}))
    return problems


class _Search:
    """Exhaustive search over start slices with symmetry breaking; keeps the best-scoring complete assignment."""

    def __init__(self, spec: MigSpec, items: list[MigProfile], mask: int, counts: Counter, compute: int):
        self.spec, self.items = spec, items
        self.full = (1 << spec.memory_slices) - 1
        self.base_counts, self.base_compute = counts, compute
        self.best_key = None
        self.best: list[int] | None = None
        self.deepest = (-1, mask, ())
        self.order = sorted(spec.profiles, key=lambda p: (-p.memory, -p.compute, p.id))
        self._score_cache: dict = {}
        self._search(0, mask, [])

    def _search(self, i: int, mask: int, starts: list[int]) -> None:
        if i > self.deepest[0]:
            self.deepest = (i, mask, tuple(starts))
        if i == len(self.items):
            key = (self._score(mask), tuple(starts))
            if self.best_key is None or key > self.best_key:
                self.best_key, self.best = key, list(starts)
            return
        profile = self.items[i]
        low = starts[-1] + 1 if i and self.items[i - 1] is profile else -1
        bits = (1 << profile.memory) - 1
        for s in profile.starts:
            if s < low or mask & (bits << s):
                continue
            starts.append(s)
            self._search(i + 1, mask | (bits << s), starts)
            starts.pop()

    def _score(self, mask: int) -> tuple[int, ...]:
        if mask in self._score_cache:
            return self._score_cache[mask]
        compute_left = self.spec.compute_slices - self.base_compute - sum(p.compute for p in self.items)
        counts = self.base_counts + Counter(p.id for p in self.items)
        score = []
        for p in self.order:
            bits, free, n = (1 << p.memory) - 1, mask, 0
            for s in p.starts:
                if not free & (bits << s):
                    free |= bits << s
                    n += 1
            score.append(max(0, min(n, p.max - counts[p.id], compute_left // p.compute)))
        self._score_cache[mask] = tuple(score)
        return self._score_cache[mask]


def _explain_no_fit(search: _Search, fixed: list[Placement]) -> Rejection:
    depth, mask, starts = search.deepest
    placed = list(fixed) + [placement_for(p, s) for p, s in zip(search.items, starts, strict=False)]
    stuck = search.items[depth]
    tried = []
    for s in stuck.starts:
        span = set(range(s, s + stuck.memory))
        hits = [f"{q.label()} on slices {sorted(span & set(range(q.start, q.end)))}" for q in placed
                if span & set(range(q.start, q.end))]
        tried.append({"start": s, "collides_with": hits})
    free = [i for i in range(search.spec.memory_slices) if not mask >> i & 1]
    detail = "; ".join(f"start {t['start']}: {', '.join(t['collides_with'])}" for t in tried)
    return Rejection(
        "no_placement",
        f"no start slices fit the whole request: after placing {', '.join(q.label() for q in placed) or 'nothing'}, "
        f"{stuck.name} (starts {list(stuck.starts)}, {stuck.memory} slices) has no room; free slices {free}; {detail}",
        {"profile": stuck.name, "placed": [q.as_dict() for q in placed], "free_slices": free, "tried": tried})


def mig_plan(spec: MigSpec, request: Sequence, *, current: Iterable = (), remove: Iterable = (),
             driver_version: str | None = None) -> Plan:
    """Plan GPU instances for `request` on a GPU whose layout is `current`, after removing `remove`.

    `request`: profile ids or names (this model's names), or `(ref, start)` to pin a start slice.
    `current` / `remove`: `Placement`s or `(ref, start)`. Never moves a kept instance. Returns a `Plan`; on
    rejection `plan.rejections` lists every limit hit (`unknown_profile`, `max_instances`, `compute_slices`,
    `memory_slices`, `driver_too_old`, `start_not_allowed`, `slices_collide`, `not_in_layout`, `no_placement`).
    """
    if spec is None:
        return Plan(ok=False, rejections=(Rejection("mig_unsupported", "this GPU model does not support MIG"),))
    current_p = [_as_placement(spec, c) for c in current]
    problems = [p for p in current_p if isinstance(p, Rejection)]
    current_p = [p for p in current_p if isinstance(p, Placement)]
    removed: list[Placement] = []
    for item in remove:
        p = _as_placement(spec, item)
        if isinstance(p, Rejection):
            problems.append(p)
        elif p in current_p and p not in removed:
            removed.append(p)
        else:
            problems.append(Rejection("not_in_layout", f"{p.label()} is not in the current layout",
                                      {"instance": p.as_dict()}))
    kept = [p for p in current_p if p not in removed]
    pinned: list[Placement] = []
    free_items: list[tuple[int, MigProfile]] = []
    for idx, item in enumerate(request):
        ref, start = _as_item(item)
        profile = _resolve(spec, ref)
        if profile is None:
            problems.append(Rejection("unknown_profile", f"unknown MIG profile {ref!r} for this GPU model",
                                      {"profile": ref}))
        elif start is not None:
            pinned.append(placement_for(profile, int(start)))
        else:
            free_items.append((idx, profile))
    if problems:
        return Plan(ok=False, rejections=tuple(problems))
    fixed = kept + pinned
    problems = mig_layout_validate(spec, fixed, driver_version=None)
    existing = Counter(p.profile_id for p in kept)
    counts = Counter(p.profile_id for p in fixed) + Counter(p.id for _, p in free_items)
    compute = sum(p.compute for p in fixed) + sum(p.compute for _, p in free_items)
    memory = sum(p.size for p in fixed) + sum(p.memory for _, p in free_items)
    limit = _limit_problems(spec, counts, compute, memory, driver_version, existing)
    problems = [p for p in problems if p.code not in {"max_instances", "compute_slices"}] + limit
    if problems:
        return Plan(ok=False, rejections=tuple(problems))
    order = sorted(free_items, key=lambda t: (-t[1].memory, -t[1].compute, t[1].id, t[0]))
    mask = 0
    for p in fixed:
        mask |= p.mask()
    search = _Search(spec, [p for _, p in order], mask, Counter(p.profile_id for p in fixed),
                     sum(p.compute for p in fixed))
    if search.best is None:
        return Plan(ok=False, rejections=(_explain_no_fit(search, fixed),))
    chosen = {idx: placement_for(p, s) for (idx, p), s in zip(order, search.best, strict=True)}
    pinned_iter = iter(pinned)
    new = tuple(chosen[i] if i in chosen else next(pinned_iter) for i in range(len(request)))
    return Plan(ok=True, placements=new, layout=tuple(sorted(kept + list(new))), removed=tuple(removed))


def mig_max_placeable(spec: MigSpec, layout: Iterable) -> dict[str, int]:
    """How many more instances of each profile (alone) fit next to `layout`: `{profile name: count}`."""
    fixed = [p for p in (_as_placement(spec, x) for x in layout) if isinstance(p, Placement)]
    search = _Search(spec, [], sum(p.mask() for p in fixed), Counter(p.profile_id for p in fixed),
                     sum(p.compute for p in fixed))
    return {p.name: n for p, n in zip(search.order, search.best_key[0], strict=True)}


def mig_single_strategy_problems(gpus: Sequence[tuple[bool, Iterable]]) -> list[Rejection]:
    """Check a node for the `single` MIG strategy (NVIDIA GPU Operator: every GPU in MIG mode, sliced alike).

    `gpus`: `(mig_enabled, layout)` per GPU in index order, layout items carrying a profile (`Placement`,
    `(profile, start)` or a profile name). Returns [] when the node may be advertised as uniform capacity (RW-065).
    """
    problems = []
    shapes = []
    for index, (enabled, layout) in enumerate(gpus):
        if not enabled:
            problems.append(Rejection("gpu_not_in_mig", f"GPU {index} is not in MIG mode", {"gpu_index": index}))
            continue
        names = sorted(p.profile if isinstance(p, Placement) else str(_as_item(p)[0]) for p in layout)
        shapes.append((index, names))
    if len({tuple(n) for _, n in shapes}) > 1:
        problems.append(Rejection("non_uniform_layout", "GPUs are sliced differently: " + "; ".join(
            f"GPU {i}: {', '.join(n) or 'no instances'}" for i, n in shapes), {"layouts": dict(shapes)}))
    return problems
