"""Device choice inside one host: which GPUs, which MIG start slice, which GPU for a vGPU or a share.

* Whole GPUs on an HGX host: exactly one NVSwitch partition's GPUs from the catalog (Fabric Manager shared
  NVSwitch multitenancy; `apps.inventory.catalog.nvswitch_partitions`, GPU physical id = index + 1). Among free
  partitions of the requested size prefer (1) one NUMA node, (2) breaking the fewest still-free larger
  partitions, (3) the lowest partition id. A size with no partition (e.g. 3 GPUs) does not fit.
* Whole GPUs elsewhere: one NUMA node when one has room (the fullest such node, to keep whole nodes free).
* A VM's GPUs (`fit`): only a choice whose host NUMA nodes can hold the guest NUMA nodes the VM gets there (its
  memory and vCPUs split over its GPUs' nodes, each bound to its node: docs/adr/0505, 0510); on a host without
  NVSwitch partitions, when no single node can, the GPUs are spread over the nodes (round robin) so each guest
  node needs less. No such choice: ``numa_capacity``.
* MIG: `apps.inventory.mig.mig_plan` next to the GPU's current GPU instances (from the ledger).
* vGPU: homogeneous vGPU mode (one type per GPU), at most the catalog's maximum of that type.
* Share: the GPU scored best by the packing policy (`apps.scheduling.policies`), i.e. the FGD family.

Across hosts, shares, MIG slices and vGPUs are all ranked by the packing policy first (`weighers.policy_scores`,
sizes from `fractional`); for MIG and vGPU the GPU and start slice inside the chosen host stay the choice made
here (`mig_options` / `vgpu_options`), which enforce NVIDIA's placement rules.

``choose_*`` return ``(choice, score)`` or ``(None, reason)``; ``mig_options`` / ``vgpu_options`` return every GPU
that fits with its score (and the reason when none does), `best_option` picks the best. A higher score is a
better fit for binpack.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from functools import lru_cache

from apps.inventory.catalog import gpu_model_get, nvswitch_partitions
from apps.inventory.mig import mig_max_placeable, mig_plan
from apps.inventory.numa import guest_numa_shortfall

from ..models import GPU_SLICES


@dataclass(frozen=True)
class GpuRow:
    id: uuid.UUID | None  # None until resolved (the exact path ranks by index first)
    index: int
    numa: int
    model: str = ""
    occupancy: tuple = ()  # allocations overlapping the window: dicts rc/lo/hi/amount/profile/parent


def choose_whole_gpus(n: int, free: list[GpuRow], nvswitch_system: str, fit: tuple | None = None):
    """Pick `n` GPUs out of `free`. Returns ((gpus, detail), score) or (None, reason). The choice depends only
    on (n, baseboard, free GPU indexes and NUMA nodes, `fit`), so it is memoised: a fleet has few distinct
    patterns. `fit`: see `choose_indexes`."""
    if len(free) < n:
        return None, "gpu_capacity"
    picked, detail, score = choose_indexes(n, nvswitch_system or "", tuple((g.index, g.numa) for g in free), fit)
    if picked is None:
        return None, detail
    by_index = {g.index: g for g in free}
    return ([by_index[i] for i in picked], detail_dict(detail)), score


def detail_dict(detail: tuple) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in detail}


@lru_cache(maxsize=16)
def _partition_masks(system: str) -> tuple[tuple[int, int, int], ...]:
    """(partition id, GPU bitmask by index, size) of a baseboard's Fabric Manager partitions."""
    out = []
    for p in nvswitch_partitions(system):
        mask = 0
        for phys in p["gpus"]:
            mask |= 1 << (phys - 1)
        out.append((p["id"], mask, len(p["gpus"])))
    return tuple(out)


@lru_cache(maxsize=65536)
def choose_indexes(n: int, system: str, free: tuple[tuple[int, int], ...], fit: tuple | None = None):
    """`free`: ((GPU index, NUMA node), ...); `fit`: (vCPUs, memory MiB, `apps.inventory.numa.NodeCaps`) of the VM
    whose guest NUMA nodes the chosen GPUs' host nodes must hold, or None (bare metal, CPU-less checks).
    -> (chosen indexes, detail items, score) or (None, reason, 0)."""
    numa_of = dict(free)

    def ok(idxs) -> bool:
        return fit is None or not guest_numa_shortfall([numa_of[i] for i in idxs], *fit)

    parts = _partition_masks(system) if system else ()
    if not parts:
        by_numa: dict[int, list[int]] = {}
        for idx, node in free:
            by_numa.setdefault(node, []).append(idx)
        fitting = sorted((len(v), node) for node, v in by_numa.items() if len(v) >= n and ok(v[:n]))
        if fitting:
            node = fitting[0][1]
            return tuple(by_numa[node][:n]), (("numa_nodes", (node,)),), 1.0
        options = [tuple(idx for idx, _ in free[:n])]
        if fit is not None:  # spread over the nodes: every guest node needs less of its host node
            lists = [by_numa[node] for node in sorted(by_numa)]
            spread = [lst[i] for i in range(max(map(len, lists), default=0)) for lst in lists if i < len(lst)]
            options.append(tuple(sorted(spread[:n])))
        for chosen in options:
            if ok(chosen):
                return chosen, (("numa_nodes", tuple(sorted({numa_of[i] for i in chosen}))),), 0.0
        return None, "numa_capacity", 0.0
    free_mask = 0
    for idx, _ in free:
        free_mask |= 1 << idx
    sized = [p for p in parts if p[2] == n]
    if not sized:
        return None, "nvswitch_partition_size", 0.0
    usable = [p for p in sized if p[1] & ~free_mask == 0]
    if not usable:
        return None, "nvswitch_partition_busy", 0.0
    if fit is not None:
        usable = [p for p in usable if ok([i for i in range(64) if p[1] >> i & 1])]
        if not usable:
            return None, "numa_capacity", 0.0

    def key(p):
        idxs = [i for i in range(64) if p[1] >> i & 1]
        numa = len({numa_of[i] for i in idxs})
        broken = sum(1 for q in parts if q[2] > n and p[1] & ~q[1] == 0 and q[1] & ~free_mask == 0)
        return (numa, broken, p[0])

    best = min(usable, key=key)
    numa, broken, _ = key(best)
    chosen = tuple(i for i in range(64) if best[1] >> i & 1)
    detail = (("nvswitch_partition", best[0]), ("numa_nodes", tuple(sorted({numa_of[i] for i in chosen}))))
    return chosen, detail, float(2 - min(numa, 2)) - broken / 10


def _mig_current(g: GpuRow) -> list | None:
    """The GPU's current GPU instances as (profile, start), or None when a non-MIG row holds slices."""
    current = []
    for a in g.occupancy:
        if a["rc"] != "mig":
            if a["rc"] == "gpu":
                return None
            continue
        current.append((a["profile"], a["lo"]))
    return current


@lru_cache(maxsize=4096)
def _mig_planned(model: str, profile: str, current: tuple, driver_version: str | None):
    """(placement, score) of one `profile` instance on a `model` GPU laid out as `current`, or None when it does not
    fit. The planner is a pure function of the catalog and the layout, so GPUs laid out alike (most are empty)
    are planned once per process."""
    spec = gpu_model_get(model)
    plan = mig_plan(spec.mig, [profile], current=list(current), driver_version=driver_version)
    if not plan.ok:
        return None
    kept = sum(mig_max_placeable(spec.mig, plan.layout).values())
    return plan.placements[0], plan.memory_slices_used / GPU_SLICES + kept / 100


def mig_options(profile: str, gpus: list[GpuRow], driver_version: str | None = None):
    """Every GPU of `gpus` that can take one GPU instance of `profile` now, with the start slice the MIG planner
    chooses there (NVIDIA's placement rules, `apps.inventory.mig.mig_plan`) and its binpack score: slices used
    after (best fit), then the placeability kept for other profiles. Returns ([(gpu, placement, score)], reason
    when the list is empty)."""
    options = []
    reason = "mig_geometry"
    for g in gpus:
        spec = gpu_model_get(g.model)
        if spec is None or spec.mig is None:
            reason = "mig_unsupported"
            continue
        if spec.mig.profile(profile) is None:
            reason = "mig_profile_unsupported"
            continue
        current = _mig_current(g)
        if current is None:
            continue
        planned = _mig_planned(g.model, profile, tuple(current), driver_version)
        if planned is not None:
            options.append((g, *planned))
    return options, reason


def vgpu_options(vgpu_type: str, gpus: list[GpuRow]):
    """Every GPU of `gpus` that can take one more vGPU of `vgpu_type`: homogeneous vGPU mode (one type per GPU, no
    MIG or whole-GPU row), at most the catalog's maximum of the type. Score: the GPU's fill after, (used + 1) /
    max. Returns ([(gpu, None, score)], reason when the list is empty)."""
    options = []
    reason = "vgpu_capacity"
    for g in gpus:
        spec = gpu_model_get(g.model)
        vtype = next((t for t in spec.vgpu_types if t.name == vgpu_type), None) if spec else None
        if vtype is None:
            reason = "vgpu_type_unsupported"
            continue
        rows = [a for a in g.occupancy if a["rc"] == "vgpu"]
        if any(a["profile"] != vgpu_type for a in rows) or any(a["rc"] in ("gpu", "mig") for a in g.occupancy):
            continue
        used = sum(a["amount"] for a in rows)
        if used + 1 > vtype.max:
            continue
        options.append((g, None, (used + 1) / vtype.max))
    return options, reason


def best_option(options: list, reason: str):
    """((gpu, extra), score) of the best-scored option (the first on ties), or (None, reason) when none."""
    if not options:
        return None, reason
    g, extra, score = max(options, key=lambda t: t[2])  # max keeps the first of equal scores
    return (g, extra), score


def share_free_milli(g: GpuRow) -> int:
    if any(a["rc"] in ("gpu", "mig") for a in g.occupancy):
        return 0
    return 1000 - sum(a["amount"] for a in g.occupancy if a["rc"] == "share")


def choose_share(share_milli: int, gpus: list[GpuRow]):
    """Best fit among GPUs with room (the least free milli-GPU left); the packing-policy scorer refines the
    ranking across hosts (see `weighers.policy_scores`)."""
    fitting = [(share_free_milli(g), g) for g in gpus if share_free_milli(g) >= share_milli]
    if not fitting:
        return None, "share_capacity"
    free, g = min(fitting, key=lambda t: (t[0], t[1].index))
    return g, 1.0 - (free - share_milli) / 1000
