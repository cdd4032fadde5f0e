"""The allocation ledger's writes: claim, release, replace. The only code that writes `Allocation` rows.

Every write runs in one transaction (a savepoint when the caller already has one), so a claim of many rows on
many hosts (a gang) is all-or-nothing. Order inside a write (docs/adr/0400-allocation-ledger.md):

1. lock the consumer row (``SELECT ... FOR UPDATE``) and check ``expected_generation`` when given;
2. lock the per-host ledger rows (`HostUsage`) in host id order;
3. insert the rows - the exclusion constraints reject any overlapping slice range (whole GPU, MIG, leases);
4. check countable sums (vGPUs, VFs, shares, vCPUs, memory) at their peak over the period, under the locks;
5. recompute the hosts' usage summary and bump the consumer's generation.

Errors: `CapacityUnavailable` (409, code ``capacity_unavailable``) when the fleet cannot hold the claim,
`ConsumerGenerationConflict` (409) on a stale generation, `InvalidAllocation` (400) on a malformed spec.
"""
from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import IntegrityError, connection, transaction
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange, NumericRange
from django.db.models import F, Q

from apps.core import clock
from apps.inventory.catalog import gpu_model_get
from apps.inventory.models import Gpu

from ..errors import CapacityUnavailable, ConsumerGenerationConflict, InvalidAllocation
from ..models import (
    GPU_COUNTABLE_CLASSES,
    GPU_SLICES,
    SLICE_CLASSES,
    Allocation,
    Consumer,
    ConsumerType,
    ResourceClass,
)
from . import sql

EXCLUSION_VIOLATION = "23P01"
SHARE_CAPACITY_MILLI = 1000


@dataclass(frozen=True)
class ConsumerRef:
    """Who claims: the consumer's own id, its type (`ConsumerType`), its project, and placement hints."""

    id: uuid.UUID
    consumer_type: str
    project_id: uuid.UUID
    group: str = ""
    dedicated: bool = False


@dataclass(frozen=True)
class AllocationSpec:
    """One resource on one host. ``slices`` is ``(start, end)`` in memory slices for `ResourceClass.MIG`
    (a whole GPU is always ``(0, 8)``); ``amount`` is a count, MiB or milli-GPU; ``profile`` the MIG profile
    name or vGPU type."""

    host_id: uuid.UUID
    resource_class: str
    gpu_id: uuid.UUID | None = None
    slices: tuple[int, int] | None = None
    amount: int = 1
    profile: str = ""


def _validate(spec: AllocationSpec) -> AllocationSpec:
    rc = spec.resource_class
    if rc not in ResourceClass.values:
        raise InvalidAllocation(f"unknown resource class {rc!r}")
    if spec.amount < 1:
        raise InvalidAllocation("amount must be at least 1")
    if rc in SLICE_CLASSES or rc in GPU_COUNTABLE_CLASSES:
        if spec.gpu_id is None:
            raise InvalidAllocation(f"{rc} needs a gpu")
    if rc == ResourceClass.GPU:
        return AllocationSpec(spec.host_id, rc, spec.gpu_id, (0, GPU_SLICES), 1, spec.profile)
    if rc == ResourceClass.MIG:
        if not spec.slices or not (0 <= spec.slices[0] < spec.slices[1] <= GPU_SLICES):
            raise InvalidAllocation(f"MIG slices must lie in [0, {GPU_SLICES})")
        return AllocationSpec(spec.host_id, rc, spec.gpu_id, spec.slices, 1, spec.profile)
    if rc == ResourceClass.SHARE and spec.amount > SHARE_CAPACITY_MILLI:
        raise InvalidAllocation("a share is at most 1000 milli-GPU")
    if rc == ResourceClass.VGPU and not spec.profile:
        raise InvalidAllocation("vgpu needs a vGPU type in profile")
    return AllocationSpec(spec.host_id, rc, spec.gpu_id, None, spec.amount, spec.profile)


def _period(start: dt.datetime | None, end: dt.datetime | None, now: dt.datetime) -> DateTimeTZRange:
    start = start or now
    if end is not None and end <= start:
        raise InvalidAllocation("period end must be after its start ([start, end) is half-open)")
    return DateTimeTZRange(start, end, "[)")


def _lock_consumer(ref: ConsumerRef, expected_generation: int | None, now: dt.datetime) -> Consumer:
    """Create the consumer row if new, and lock it (one statement)."""
    with connection.cursor() as cur:
        cur.execute(sql.UPSERT_CONSUMER, {"id": ref.id, "type": ref.consumer_type, "project": ref.project_id,
                                          "group": ref.group, "dedicated": ref.dedicated, "now": now})
        ctype, project_id, generation = cur.fetchone()
    if ctype != ref.consumer_type or project_id != ref.project_id:
        raise InvalidAllocation("consumer id already used by another consumer type or project",
                                code="consumer_type_mismatch")
    if expected_generation is not None and generation != expected_generation:
        raise ConsumerGenerationConflict(
            f"consumer generation is {generation}, not {expected_generation}; re-read and retry",
            generation=generation)
    return Consumer(id=ref.id, consumer_type=ctype, project_id=project_id, generation=generation)


def lock_hosts(host_ids: Sequence[uuid.UUID], now: dt.datetime) -> dict[uuid.UUID, tuple[int, int]]:
    """Create missing ledger rows, then lock them in host id order. Returns {host id: (vCPU threads, memory
    MiB)} - the host-level capacities the sum checks use."""
    ordered = sorted(set(host_ids))
    with connection.cursor() as cur:
        cur.execute(sql.LOCK_HOSTS, [ordered])
        locked = {h: (threads, memory) for h, threads, memory in cur.fetchall()}
        if len(locked) < len(ordered):  # a host's first claim: create its row, then lock all again in order
            cur.execute(sql.ENSURE_USAGE_ROWS, [now, ordered])
            cur.execute(sql.LOCK_HOSTS, [ordered])
            locked = {h: (threads, memory) for h, threads, memory in cur.fetchall()}
        return locked


def refresh_usage(host_ids: Sequence[uuid.UUID], now: dt.datetime | None = None,
                  bump_consumer: uuid.UUID | None = None) -> None:
    """Recompute the `HostUsage` summary of `host_ids` from the ledger (call under the host locks); with
    `bump_consumer`, increment that consumer's generation in the same statement."""
    if host_ids:
        with connection.cursor() as cur:
            cur.execute(sql.REFRESH_USAGE, {"hosts": list(host_ids), "now": now or clock.now(),
                                            "consumer": bump_consumer})


def _find_parent(spec: AllocationSpec, period: DateTimeTZRange, parents: list[Allocation]) -> Allocation | None:
    """The lease row that holds `spec` for the whole period: same GPU and covering slices, or same host-level
    class on the same host. vCPUs / memory of a host where the lease holds none of that class stay top-level
    (drawn from the host's general pool); anything else outside the holding is refused."""
    def covers_time(p: Allocation) -> bool:
        pe, ce = p.period.upper, period.upper
        return p.period.lower <= period.lower and (pe is None or (ce is not None and ce <= pe))

    for p in parents:
        if p.host_id != spec.host_id or not covers_time(p):
            continue
        if spec.gpu_id is not None and p.gpu_id == spec.gpu_id and p.resource_class in SLICE_CLASSES:
            if spec.slices is None or (p.slices.lower <= spec.slices[0] and spec.slices[1] <= p.slices.upper):
                return p
        if spec.gpu_id is None and p.resource_class == spec.resource_class:
            return p
    if spec.gpu_id is None and not any(p.host_id == spec.host_id and p.resource_class == spec.resource_class
                                       for p in parents):
        return None  # the lease holds no vCPUs / memory here: they come from the host's general pool
    raise CapacityUnavailable(
        f"{spec.resource_class} on host {spec.host_id} is not within the lease's holding for the period",
        explanation={"filters": [{"filter": "lease_holding", "removed": 1,
                                  "reason": "not held by the lease over the requested period"}]})


def _countable_capacity(row: Allocation, hosts: dict, gpus: dict) -> int:
    rc = row.resource_class
    if rc == ResourceClass.VCPU:
        return hosts[row.host_id][0]
    if rc == ResourceClass.MEMORY:
        return hosts[row.host_id][1]
    if rc == ResourceClass.SHARE:
        return SHARE_CAPACITY_MILLI
    spec = gpu_model_get(gpus[row.gpu_id].model)
    if spec is None:
        raise InvalidAllocation(f"GPU model {gpus[row.gpu_id].model!r} is not in the catalog")
    if rc == ResourceClass.VF:
        return spec.sriov_vfs
    vtype = next((t for t in spec.vgpu_types if t.name == row.profile), None)
    if vtype is None:
        raise InvalidAllocation(f"vGPU type {row.profile!r} does not exist for {spec.key}")
    return vtype.max


def _check_vgpu_homogeneous(rows: list[Allocation]) -> None:
    for r in rows:
        if r.resource_class != ResourceClass.VGPU:
            continue
        with connection.cursor() as cur:
            cur.execute(sql.OTHER_VGPU_TYPES, {"gpu": r.gpu_id, "profile": r.profile, "window": r.period})
            others = [x[0] for x in cur.fetchall()]
        if others:
            raise CapacityUnavailable(f"GPU {r.gpu_id} already carries vGPU type {others[0]} (one type per GPU)")


def _check_countables(rows: list[Allocation], hosts: dict, period: DateTimeTZRange) -> None:
    """Sum checks for countable rows (after insert, under the host locks): the holders set and the workloads
    set must each stay within capacity at their peak over the period, and children within their parent.
    All checks run in one query."""
    countable = [r for r in rows if r.resource_class not in SLICE_CLASSES]
    if not countable:
        return
    gpu_ids = {r.gpu_id for r in countable if r.resource_class in (ResourceClass.VGPU, ResourceClass.VF)}
    gpus = {g.id: g for g in Gpu.objects.filter(id__in=gpu_ids)} if gpu_ids else {}
    checks: dict[tuple, tuple[Allocation, int]] = {}
    for r in countable:
        cap = _countable_capacity(r, hosts, gpus)
        profile = r.profile if r.resource_class == ResourceClass.VGPU else ""
        base = (r.host_id, r.resource_class, r.gpu_id, profile)
        if r.parent_id is None and not r.spot:
            checks[(*base, "h", None)] = (r, cap)
        if r.consumer_type != ConsumerType.LEASE:
            checks[(*base, "w", None)] = (r, cap)
        if r.parent_id is not None and r.parent.resource_class == r.resource_class:
            checks[(*base, "p", r.parent_id)] = (r, r.parent.amount)
    _check_vgpu_homogeneous(countable)
    keys = list(checks)
    cols = list(zip(*keys, strict=True))
    with connection.cursor() as cur:
        cur.execute(sql.PEAK_SUMS, {"window": period, "i": list(range(len(keys))), "host": list(cols[0]),
                                    "rc": list(cols[1]), "gpu": list(cols[2]), "profile": list(cols[3]),
                                    "kind": list(cols[4]), "parent": list(cols[5])})
        peaks = dict(cur.fetchall())
    names = {"h": "holders", "w": "workloads", "p": "lease_holding"}
    for i, key in enumerate(keys):
        r, limit = checks[key]
        if peaks[i] > limit:
            raise CapacityUnavailable(
                f"{r.resource_class} on host {r.host_id} would reach {peaks[i]} of {limit} ({names[key[4]]})",
                resource_class=r.resource_class, host=str(r.host_id),
                bound_by="lease" if key[4] == "p" else "host")


def allocations_claim(*, consumer: ConsumerRef, specs: Sequence[AllocationSpec],
                      start: dt.datetime | None = None, end: dt.datetime | None = None, spot: bool = False,
                      parent_consumer_id: uuid.UUID | None = None, expected_generation: int | None = None,
                      replace: bool = False) -> list[Allocation]:
    """Claim all `specs` for `consumer` over ``[start, end)`` (start defaults to now, end None = open), or
    nothing. `parent_consumer_id` names the lease the claim draws from (each row nests under the lease's row
    that covers it). `replace=True` first ends the consumer's live allocations at the same instant (a resize or
    rebuild: the consumer never holds both). Returns the created rows."""
    if consumer.consumer_type not in ConsumerType.values:
        raise InvalidAllocation(f"unknown consumer type {consumer.consumer_type!r}")
    if consumer.consumer_type == ConsumerType.LEASE and (spot or parent_consumer_id):
        raise InvalidAllocation("a lease is neither spot nor nested")
    specs = [_validate(s) for s in specs]
    if not specs:
        raise InvalidAllocation("nothing to claim")
    now = clock.now()
    period = _period(start, end, now)
    try:
        with transaction.atomic():
            c = _lock_consumer(consumer, expected_generation, now)
            parents: list[Allocation] = []
            if parent_consumer_id:
                parents = list(Allocation.objects.filter(consumer_id=parent_consumer_id,
                                                         consumer_type=ConsumerType.LEASE))
            old_hosts = set()
            if replace:
                old_hosts = set(Allocation.objects.filter(consumer=c).values_list("host_id", flat=True))
            hosts = lock_hosts([s.host_id for s in specs] + list(old_hosts), now)
            if replace:
                _end_rows(Allocation.objects.filter(consumer=c), now)
            rows = [_row(c, s, period, spot, _find_parent(s, period, parents) if parents else None)
                    for s in specs]
            if parent_consumer_id and not parents:
                raise CapacityUnavailable("the lease holds no capacity", code="capacity_unavailable")
            Allocation.objects.bulk_create(rows)
            _check_countables(rows, hosts, period)
            refresh_usage(list(hosts), now, bump_consumer=c.id)
            return rows
    except IntegrityError as exc:
        if getattr(exc.__cause__, "sqlstate", None) == EXCLUSION_VIOLATION:
            raise CapacityUnavailable("a GPU or slice range is already allocated for an overlapping period",
                                      reason="slice_overlap")
        raise


def _row(c: Consumer, s: AllocationSpec, period, spot: bool, parent: Allocation | None) -> Allocation:
    return Allocation(
        consumer=c, consumer_type=c.consumer_type, project_id=c.project_id, host_id=s.host_id, gpu_id=s.gpu_id,
        resource_class=s.resource_class, slices=NumericRange(*s.slices, "[)") if s.slices else None,
        amount=s.amount, profile=s.profile, period=period, parent=parent, spot=spot, created_at=period.lower)


def _end_rows(qs, at: dt.datetime) -> int:
    """End live rows of `qs` (and rows nested in them) at `at`: rows that start at or after `at` are deleted,
    the others get ``end = at``. Returns how many rows changed."""
    live = qs.filter(Q(period__upper_inf=True) | Q(period__endswith__gt=at))
    ids = list(live.values_list("id", flat=True))
    if not ids:
        return 0
    children = Allocation.objects.filter(parent_id__in=ids)
    n = _end_rows(children, at) if children.exists() else 0
    live = Allocation.objects.filter(id__in=ids)
    n += live.filter(period__startswith__gte=at).delete()[0]
    for a in live:
        a.period = DateTimeTZRange(a.period.lower, at, "[)")
        a.save(update_fields=["period"])
        n += 1
    return n


def allocations_release(*, consumer_id: uuid.UUID, at: dt.datetime | None = None,
                        expected_generation: int | None = None, keep: Sequence[uuid.UUID] = (),
                        only: Sequence[uuid.UUID] | None = None) -> int:
    """End every live allocation of the consumer at `at` (default now), with rows nested in them; rows that
    had not started yet are deleted. `keep`: allocation ids left live (a VM re-created elsewhere holds its new
    claim beside the old one until the old is released); `only`: these ids alone (that claim undone). Idempotent: releasing twice changes nothing. Returns
    the rows changed."""
    at = at or clock.now()
    with transaction.atomic():
        c = Consumer.objects.select_for_update().filter(id=consumer_id).first()
        if c is None:
            return 0
        if expected_generation is not None and c.generation != expected_generation:
            raise ConsumerGenerationConflict(f"consumer generation is {c.generation}, not {expected_generation}",
                                             generation=c.generation)
        qs = Allocation.objects.filter(consumer=c).exclude(id__in=list(keep))
        if only is not None:
            qs = qs.filter(id__in=list(only))
        host_ids = set(qs.values_list("host_id", flat=True))
        host_ids |= set(Allocation.objects.filter(parent__in=qs).values_list("host_id", flat=True))
        if not host_ids:
            return 0
        hosts = lock_hosts(list(host_ids), at)
        n = _end_rows(qs, at)
        if n:
            refresh_usage(list(hosts), clock.now())
            Consumer.objects.filter(id=c.id).update(generation=F("generation") + 1, updated_at=at)
        return n


def allocations_move_host(*, consumer_id: uuid.UUID, from_host_id: uuid.UUID, to_host_id: uuid.UUID,
                          gpu_map: dict[uuid.UUID, uuid.UUID], at: dt.datetime | None = None) -> list[Allocation]:
    """Move a lease's capacity off a failed host (its host replacement from the spare pool): in one transaction,
    every live row of the consumer on `from_host_id` ends at `at` (default now; rows not started yet are deleted)
    and a row like it is created on `to_host_id` over ``[max(at, old start), old end)``: a whole-GPU row on
    ``gpu_map[old gpu id]`` (a GPU of the new host), a vCPU or memory row with the same amount. Rows nested in
    the old rows are left as they are: the workloads still run on the old host until they are re-created (each
    leaves through its own release), so the old GPUs stay busy for everyone else meanwhile. The consumer's
    generation is bumped. Raises `InvalidAllocation` (400) for a row this cannot move (a MIG, vGPU, VF or share
    row, a GPU missing from `gpu_map`) and `CapacityUnavailable` (409, ``slice_overlap``) when a new GPU is held
    over the period; either way nothing changes. Returns the created rows."""
    at = at or clock.now()
    try:
        with transaction.atomic():
            c = Consumer.objects.select_for_update().filter(id=consumer_id).first()
            if c is None:
                return []
            hosts = lock_hosts([from_host_id, to_host_id], at)
            old = list(Allocation.objects.filter(consumer=c, host_id=from_host_id)
                       .filter(Q(period__upper_inf=True) | Q(period__endswith__gt=at)))
            if not old:
                return []
            rows = []
            for a in old:
                if a.resource_class == ResourceClass.GPU and a.gpu_id in gpu_map:
                    gpu_id = gpu_map[a.gpu_id]
                elif a.resource_class in (ResourceClass.VCPU, ResourceClass.MEMORY):
                    gpu_id = None
                else:
                    raise InvalidAllocation(f"a {a.resource_class} row cannot move to another host",
                                            code="allocation_not_movable")
                start = max(at, a.period.lower)
                period = DateTimeTZRange(start, a.period.upper, "[)")
                rows.append(Allocation(
                    consumer=c, consumer_type=c.consumer_type, project_id=c.project_id, host_id=to_host_id,
                    gpu_id=gpu_id, resource_class=a.resource_class, slices=a.slices, amount=a.amount,
                    profile=a.profile, period=period, parent=None, spot=a.spot, created_at=start))
            ids = [a.pk for a in old]
            Allocation.objects.filter(id__in=ids, period__startswith__gte=at).delete()
            for a in Allocation.objects.filter(id__in=ids):
                a.period = DateTimeTZRange(a.period.lower, at, "[)")
                a.save(update_fields=["period"])
            Allocation.objects.bulk_create(rows)
            _check_countables(rows, hosts, rows[0].period)
            refresh_usage(list(hosts), clock.now())
            Consumer.objects.filter(id=c.id).update(generation=F("generation") + 1, updated_at=at)
            return rows
    except IntegrityError as exc:
        if getattr(exc.__cause__, "sqlstate", None) == EXCLUSION_VIOLATION:
            raise CapacityUnavailable("a GPU of the new host is already allocated for an overlapping period",
                                      reason="slice_overlap")
        raise


def gpu_holders(*, host_id: uuid.UUID, gpu_ids: Sequence[uuid.UUID], lock: bool = True) -> dict[uuid.UUID, list[dict]]:
    """Who holds each of `gpu_ids` (GPUs of `host_id`) in the ledger now or later: every allocation on them whose
    period has not ended (running on-demand work, spot, leases, instances in leases, and future leases).

    With `lock` the host's ledger row is locked first (`lock_hosts`), so a claim on the host waits for the caller's
    transaction: a re-slice decided on this answer cannot race a claim (call inside a transaction). Returns
    {gpu id: [{"allocation_id", "consumer_type", "consumer_id", "resource_class", "slices": [lo, hi] | None,
    "profile", "start" (ISO time), "end" (ISO time | None)}]}, GPUs that nobody holds left out."""
    at = clock.now()
    if lock:
        lock_hosts([host_id], at)
    rows = (Allocation.objects.filter(host_id=host_id, gpu_id__in=list(gpu_ids))
            .filter(Q(period__upper_inf=True) | Q(period__endswith__gt=at))
            .order_by("gpu_id", "created_at")
            .values_list("id", "gpu_id", "consumer_type", "consumer_id", "resource_class", "slices", "profile",
                         "period"))
    out: dict[uuid.UUID, list[dict]] = {}
    for aid, gpu_id, ctype, cid, rc, slices, profile, period in rows:
        out.setdefault(gpu_id, []).append({
            "allocation_id": str(aid), "consumer_type": ctype, "consumer_id": str(cid), "resource_class": rc,
            "slices": [slices.lower, slices.upper] if slices is not None else None, "profile": profile,
            "start": period.lower.isoformat(), "end": period.upper.isoformat() if period.upper else None})
    return out
