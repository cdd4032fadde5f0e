"""Reads of the allocation ledger: quota usage, a consumer's allocations, host usage.

Quota usage is counted from the ledger (never from instance rows): only top-level allocations count, so an
instance launched inside a lease does not count twice (the lease already holds the GPU).
"""
from __future__ import annotations

import datetime as dt
import uuid

from django.db import connection
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.db.models import Q, QuerySet, Sum

from apps.core import clock
from apps.core.errors import NotFound
from apps.inventory.models import Host, Region, Zone

from .models import GPU_SLICES, Allocation, ResourceClass


def _current(at: dt.datetime | None) -> Q:
    return Q(period__contains=at or clock.now())


def gpu_usage_for_project(project, model: str | None = None, *, at: dt.datetime | None = None) -> int:
    """Whole GPUs the project holds at `at` (default now): top-level ``gpu`` allocations (leases, on-demand,
    spot), optionally only GPUs of catalog `model`."""
    qs = Allocation.objects.filter(_current(at), project=project, resource_class=ResourceClass.GPU,
                                   parent__isnull=True)
    if model:
        qs = qs.filter(gpu__model=model)
    return qs.count()


def _scope(*, organization=None, project=None) -> Q:
    return Q(project=project) if project is not None else Q(project__organization=organization)


def quota_usage(resource: str, *, organization=None, project=None, qualifier: str | None = None,
                at: dt.datetime | None = None) -> int:
    """Usage counter for `apps.tenancy.quotas`: ``gpus`` (whole GPUs, qualifier = catalog model),
    ``mig_slices`` (MIG GPU instances, qualifier = profile name), ``vgpus`` (vGPUs, qualifier = vGPU type).
    Counts top-level allocations live at `at` (default now) of the project, or of every project of the
    organization when `project` is None. While a windowed quota check counts (`apps.tenancy.quotas.
    counting_window`, a lease's window) and no `at` is given: the peak over that window (`_peak_in`)."""
    from apps.tenancy.quotas import counting_window

    rc = {"gpus": ResourceClass.GPU, "mig_slices": ResourceClass.MIG, "vgpus": ResourceClass.VGPU}[resource]
    window = counting_window() if at is None else None
    qs = Allocation.objects.filter(_scope(organization=organization, project=project), resource_class=rc,
                                   parent__isnull=True)
    if qualifier:
        qs = qs.filter(gpu__model=qualifier) if rc == ResourceClass.GPU else qs.filter(profile=qualifier)
    if window is not None:
        return _peak_in(qs, *window, amounts=rc == ResourceClass.VGPU)
    qs = qs.filter(_current(at))
    if rc == ResourceClass.VGPU:
        return int(qs.aggregate(s=Sum("amount"))["s"] or 0)
    return qs.count()


def _peak_in(qs: QuerySet[Allocation], start: dt.datetime, end: dt.datetime | None, *, amounts: bool) -> int:
    """The most that the allocations of `qs` hold at one instant of [start, end) (end None: open): rows (or the sum of their
    `amount`) whose period contains the instant. The held total only rises where a period begins, so the peak is
    at `start` or at the start of a row inside the window; read in one query (a tenant's rows over one window)."""
    rows = list(qs.filter(period__overlap=DateTimeTZRange(start, end, "[)")).values_list("period", "amount"))
    points = {start} | {p.lower for p, _ in rows
                        if p.lower is not None and start < p.lower and (end is None or p.lower < end)}

    def held(t: dt.datetime) -> int:
        return sum((a or 0) if amounts else 1 for p, a in rows
                   if (p.lower is None or p.lower <= t) and (p.upper is None or t < p.upper))

    return max((held(t) for t in points), default=0)


def gpu_slice_usage_for_project(project, model: str | None = None, *, at: dt.datetime | None = None) -> float:
    """GPU equivalents held at `at`: whole GPUs + MIG slices / 8 + shares / 1000 (top-level rows)."""
    qs = Allocation.objects.filter(_current(at), project=project, parent__isnull=True)
    if model:
        qs = qs.filter(gpu__model=model)
    whole = qs.filter(resource_class=ResourceClass.GPU).count()
    mig = sum(a.slices.upper - a.slices.lower for a in qs.filter(resource_class=ResourceClass.MIG).only("slices"))
    share = qs.filter(resource_class=ResourceClass.SHARE).aggregate(s=Sum("amount"))["s"] or 0
    return whole + mig / GPU_SLICES + share / 1000


def vcpu_usage_for_project(project, *, at: dt.datetime | None = None) -> int:
    qs = Allocation.objects.filter(_current(at), project=project, parent__isnull=True,
                                   resource_class=ResourceClass.VCPU)
    return int(qs.aggregate(s=Sum("amount"))["s"] or 0)


def allocation_list_for_consumer(consumer_id: uuid.UUID, *, live_only: bool = True) -> QuerySet[Allocation]:
    """The consumer's allocations (live ones: end open or in the future), ordered by host then GPU."""
    qs = Allocation.objects.filter(consumer_id=consumer_id).select_related("gpu")
    if live_only:
        now = clock.now()
        qs = qs.filter(Q(period__upper_inf=True) | Q(period__endswith__gt=now))
    return qs.order_by("host_id", "gpu__index", "resource_class")


def allocation_list_live(*, host_id: uuid.UUID | None = None) -> QuerySet[Allocation]:
    """Staff read: live allocations (end open or in the future), optionally of one host."""
    now = clock.now()
    qs = Allocation.objects.filter(Q(period__upper_inf=True) | Q(period__endswith__gt=now))
    if host_id:
        qs = qs.filter(host_id=host_id)
    return qs


def allocation_list_at(*, host_id: uuid.UUID, gpu_id: uuid.UUID | None = None,
                       at: dt.datetime) -> QuerySet[Allocation]:
    """Staff read: allocations on the host (or one of its GPUs) whose period contains `at` (fault impact)."""
    qs = Allocation.objects.filter(host_id=host_id, period__contains=at)
    return qs.filter(gpu_id=gpu_id) if gpu_id is not None else qs


# --- the fleet heat map ----------------------------------------------------------------------------------------
#: a GPU's state on the heat map, the first that holds: health faulty, scrub failed, scrub pending (dirty),
#: held by a live allocation (an instance, a cluster member or a lease), else free
GPU_MAP_STATES = ("faulty", "scrub_failed", "dirty", "allocated", "free")


def _gpu_map_state(health: str, scrub_state: str, allocated: bool) -> str:
    if health == "faulty":
        return "faulty"
    if scrub_state in ("scrub_failed", "dirty"):
        return scrub_state
    return "allocated" if allocated else "free"


def _mig_summary(instances: list[str]) -> str:
    """`3g.40gb×2 1g.10gb×1` from a GPU's (or host's) GPU instance profiles, largest count first."""
    counts: dict[str, int] = {}
    for profile in instances:
        counts[profile] = counts.get(profile, 0) + 1
    return " ".join(f"{p}×{n}" for p, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


#: The heat map's GPUs: whether a live allocation holds each and its MIG GPU instances' profiles (by start slice),
#: both joined as sets. As correlated subqueries per GPU (16,000 of them) the plan's estimated cost made PostgreSQL
#: JIT-compile it, which took three quarters of the query's 0.4 s.
FLEET_GPUS_SQL = """
SELECT g.host_id, g.index, g.model, g.mode, g.health, g.scrub_state,
  g.id IN (SELECT a.gpu_id FROM scheduling_allocation a WHERE a.gpu_id IS NOT NULL AND a.period @> %(at)s) AS allocated,
  p.profiles
FROM inventory_gpu g JOIN inventory_host h ON h.id = g.host_id
LEFT JOIN (SELECT gpu_id, array_agg(profile ORDER BY start) AS profiles FROM inventory_gpuinstance GROUP BY gpu_id) p
  ON p.gpu_id = g.id
WHERE h.state <> 'retired'
ORDER BY g.host_id, g.index
"""


#: The capacity screen's GPU counts, aggregated in the database: per host first (its GPUs in the heat map's states,
#: `_gpu_map_state`, and the first of its models in code-point order, as Python's `<` orders them), then per model
#: and zone. 16,000 GPUs read into Python and counted there took 75 ms; this answers a few rows in about 15 ms.
FLEET_GPU_COUNTS_SQL = """
WITH per_host AS (
  SELECT g.host_id, min(g.model COLLATE "C") AS model, count(*) AS total,
    count(*) FILTER (WHERE g.health <> 'faulty' AND g.scrub_state NOT IN ('dirty', 'scrub_failed') AND g.id IN (
      SELECT a.gpu_id FROM scheduling_allocation a WHERE a.gpu_id IS NOT NULL AND a.period @> %(at)s)) AS allocated,
    count(*) FILTER (WHERE g.health = 'faulty') AS faulty,
    count(*) FILTER (WHERE g.health <> 'faulty' AND g.scrub_state IN ('dirty', 'scrub_failed')) AS scrubbing,
    count(*) FILTER (WHERE g.mode = 'mig') AS mig,
    count(*) FILTER (WHERE g.mode = 'vgpu') AS vgpu
  FROM inventory_gpu g GROUP BY g.host_id)
SELECT p.model, z.name, sum(p.total), sum(p.allocated), sum(p.faulty), sum(p.scrubbing),
  coalesce(sum(p.total) FILTER (WHERE h.state <> 'available'), 0), sum(p.mig), sum(p.vgpu)
FROM per_host p JOIN inventory_host h ON h.id = p.host_id JOIN inventory_zone z ON z.id = h.zone_id
WHERE h.state <> 'retired'
GROUP BY p.model, z.name
ORDER BY p.model, z.name COLLATE "C"
"""
_COUNT_KEYS = ("total", "allocated", "faulty", "scrubbing", "out_of_service", "mig", "vgpu")


def fleet_gpu_counts(at: dt.datetime | None = None) -> list[dict]:
    """The fleet's GPUs counted per GPU model and zone, with the heat map's states (`_gpu_map_state`): the
    capacity screen's figures without the heat map's 16,000 cells, in one aggregate query
    (`FLEET_GPU_COUNTS_SQL`). Hosts that are retired are left out; a host of mixed models counts under the first
    of its models in name order, as the heat map names it.

    Returns ``[{"gpu_model", "zone", "total", "allocated", "faulty", "scrubbing" (dirty or scrub failed),
    "out_of_service" (on hosts that are not available), "mig", "vgpu"}]`` sorted by model and zone. Callers
    check the caller is staff (the fleet is provider-internal)."""
    at = at or clock.now()
    with connection.cursor() as cur:
        cur.execute(FLEET_GPU_COUNTS_SQL, {"at": at})
        rows = cur.fetchall()
    return [{"gpu_model": model, "zone": zone, **{k: int(v) for k, v in zip(_COUNT_KEYS, counts, strict=True)}}
            for model, zone, *counts in rows]


def fleet_summary(actor) -> dict:
    """The whole fleet as the admin portal's heat map, in four queries whatever its size: regions → zones →
    racks → hosts (condition, agent heartbeat, GPU model, MIG layout) → GPUs (heat-map state, mode, health,
    MIG layout; whether a live allocation holds it and its MIG GPU instances are read in the GPUs' query). Staff
    only: anyone else gets NotFound (404), as for an object they may not see. Hosts without a rack sit in a rack
    named null; retired hosts are left out. Rows are read as tuples and built into plain dicts (16,000 GPUs)."""
    if not (getattr(actor, "is_authenticated", False) and getattr(actor, "staff_role", "")):
        raise NotFound()
    at = clock.now()
    hosts = list(Host.objects.exclude(state="retired").order_by("zone__name", "rack__name", "rack_unit", "name")
                 .values_list("id", "name", "zone_id", "rack__name", "rack_unit", "state", "state_reason",
                              "state_changed_at", "last_heartbeat_at", "agent_version", "provisioning_kind", "spare"))
    with connection.cursor() as cur:
        cur.execute(FLEET_GPUS_SQL, {"at": at})
        gpus = cur.fetchall()
    zones = list(Zone.objects.order_by("name").values_list("id", "name", "region_id"))
    regions = list(Region.objects.order_by("name").values_list("id", "name"))

    per_host: dict = {}
    host_models: dict = {}
    host_profiles: dict = {}
    totals = dict.fromkeys(GPU_MAP_STATES, 0)
    models: set[str] = set()
    gpu_count = 0
    for host_id, index, model, mode, health, scrub_state, allocated, profiles in gpus:
        state = _gpu_map_state(health, scrub_state, allocated)
        totals[state] += 1
        gpu_count += 1
        models.add(model)
        host_models.setdefault(host_id, set()).add(model)
        if profiles:
            host_profiles.setdefault(host_id, []).extend(profiles)
        per_host.setdefault(host_id, []).append({"index": index, "state": state, "mode": mode, "health": health,
                                                 "mig": _mig_summary(profiles) if profiles else ""})
    region_rows = {rid: {"name": name, "zones": []} for rid, name in regions}
    zone_rows: dict = {}
    for zid, name, rid in zones:
        zone_rows[zid] = {"name": name, "racks": []}
        region_rows[rid]["zones"].append(zone_rows[zid])
    racks: dict = {}
    conditions: dict[str, int] = {}
    for (hid, name, zid, rack, rack_unit, state, reason, changed_at, heartbeat, agent_version,
         kind, spare) in hosts:
        key = (zid, rack)
        if key not in racks:
            racks[key] = {"name": rack, "hosts": []}
            zone_rows[zid]["racks"].append(racks[key])
        conditions[state] = conditions.get(state, 0) + 1
        racks[key]["hosts"].append({
            "id": hid, "name": name, "rack_unit": rack_unit, "condition": state, "condition_reason": reason,
            "condition_changed_at": changed_at, "last_heartbeat_at": heartbeat, "agent_version": agent_version,
            "provisioning_kind": kind, "spare": spare, "gpu_model": "/".join(sorted(host_models.get(hid, ()))) or None,
            "mig": _mig_summary(host_profiles.get(hid, [])), "gpus": per_host.get(hid, [])})
    return {"generated_at": at, "host_count": len(hosts), "gpu_count": gpu_count, "gpu_states": totals,
            "host_conditions": conditions, "gpu_models": sorted(models), "regions": list(region_rows.values())}
