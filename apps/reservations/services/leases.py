"""Lease writes: create (request + confirm), update (rename, move, extend, shrink, grow), cancel, and the
lifecycle ticks driven by Celery beat (`leases_advance`).

Capacity is claimed in the allocation ledger through `apps.scheduling.services.placement_claim` with the lease as
consumer (consumer id = lease id, type ``lease``) over the lease window. The ledger's exclusion constraints make
two overlapping leases on the same GPUs impossible, also when requested concurrently; on-demand rows (end open)
occupy their GPUs until they end; spot rows are not in the holders set, so they never block a lease and are
preempted when it starts (`spot`). The operator's on-demand reserve is checked after the claim, under a
transaction-scoped advisory lock per GPU model, so two concurrent leases cannot both eat into it.

Quotas (docs/adr/0802-lease-gpu-quota.md): a lease counts against quota ``leases`` (unfinished leases) and holds its
GPUs (``gpus`` and ``gpus:<model>``; a MIG lease ``mig_slices`` and ``mig_slices:<profile>``) over its window: the
check counts the peak the project and organization hold at any instant of the window, so a tenant allowed 8 GPUs
cannot reserve 500 for next week. The GPU check runs under the organization lock in the confirm's transaction,
before the claim (two concurrent leases cannot both take the last GPUs of a quota), and again when an update
moves, extends or grows the lease.

Errors: 422 `quota_exceeded` (quotas ``leases``, ``gpus``, ``mig_slices``); 400 `invalid_lease_window`, `lease_start_in_past`, `lease_field_immutable`, `invalid_lease_capacity`;
409 `capacity_unavailable` (with ``explanation`` and ``constraint``), `invalid_state`; 404 for other tenants.
"""
from __future__ import annotations

import copy
import datetime as dt
import logging

from django.db import connection, transaction
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange

from apps.compute.states import GONE_STATUSES, InstanceStatus, ProvisioningKind
from apps.core import clock
from apps.core.db import advisory_xact_lock, atomic_with_retry
from apps.core.errors import QuotaExceeded, ValidationFailed
from apps.core.transitions import transition
from apps.inventory.catalog import gpu_model_get
from apps.inventory.models import Zone
from apps.inventory.selectors import gpus_in_fleet, gpus_per_host_max
from apps.scheduling.errors import CapacityUnavailable
from apps.scheduling.ledger import ConsumerRef, allocations_release
from apps.scheduling.ledger.periods import allocations_set_end, allocations_set_start
from apps.scheduling.placement import PlacementRequest, TopologyConstraint, place
from apps.scheduling.services import Unplaceable, earliest_fit, fleet_fit, placement_claim
from apps.scheduling.services.admission import refusal_constraint
from apps.tenancy.authz import authorize_project
from apps.tenancy.models import ProjectRole
from apps.tenancy.quotas import quota_check, quota_check_all

from .. import conf
from ..errors import Code
from ..models import Lease, OnDemandReserve
from ..states import (
    LEASE_FINISHED,
    LEASE_STARTED,
    LEASE_TRANSITIONS,
    EndAction,
    Event,
    LeaseKind,
    LeaseStatus,
)
from . import windows
from .notify import event_record

log = logging.getLogger("gpucloud.reservations")
WRITERS = (ProjectRole.ADMIN, ProjectRole.MEMBER)
MAX_COUNT = {LeaseKind.HOSTS: 256, LeaseKind.GPUS: 2048, LeaseKind.MIG: 512, LeaseKind.SHARES: 512}
MAX_NOTICE_S = 7 * 86400
RESERVE_SQL = """
WITH g AS (
  SELECT g.id FROM inventory_gpu g JOIN inventory_host h ON h.id = g.host_id JOIN inventory_zone z ON z.id = h.zone_id
  WHERE g.model = %(model)s AND (%(zone)s = '' OR z.name = %(zone)s) AND h.state = 'available' AND NOT h.spare AND g.health = 'ok'
), r AS (
  SELECT a.gpu_id, a.period FROM scheduling_allocation a
  WHERE a.gpu_id IN (SELECT id FROM g) AND a.slices IS NOT NULL AND a.parent_id IS NULL AND NOT a.spot
    AND a.period && %(window)s
), pts AS (
  SELECT lower(%(window)s::tstzrange) AS t UNION SELECT lower(r.period) FROM r WHERE lower(r.period) > lower(%(window)s::tstzrange)
)
SELECT (SELECT count(*) FROM g), coalesce(max((SELECT count(DISTINCT r.gpu_id) FROM r WHERE r.period @> p.t)), 0)
FROM pts p
"""


# ---- capacity -----------------------------------------------------------------------------------------------
def _bad(msg: str, field: str):
    return ValidationFailed(msg, code=Code.INVALID_CAPACITY, errors={field: [msg]})


def capacity_validate(*, kind: str, gpu_model: str, count: int, mig_profile: str = "", share_milli: int = 0,
                      zone: str = "", max_leaves_per_rail: int | None = None) -> None:
    """400 `invalid_lease_capacity` for a capacity no fleet could ever hold."""
    if kind not in LeaseKind.values:
        raise _bad(f"kind must be one of {', '.join(LeaseKind.values)}", "kind")
    spec = gpu_model_get(gpu_model)
    if spec is None:
        raise _bad(f"unknown GPU model {gpu_model!r}", "gpu_model")
    if not 1 <= count <= MAX_COUNT[kind]:
        raise _bad(f"count must be 1..{MAX_COUNT[kind]}", "count")
    if kind == LeaseKind.MIG and (spec.mig is None or spec.mig.profile(mig_profile) is None):
        raise _bad(f"{gpu_model} has no MIG profile {mig_profile!r}", "mig_profile")
    if kind != LeaseKind.MIG and mig_profile:
        raise _bad("mig_profile only with kind=mig", "mig_profile")
    if kind == LeaseKind.SHARES and not 1 <= share_milli <= 999:
        raise _bad("share_milli must be 1..999", "share_milli")
    if max_leaves_per_rail is not None and (kind != LeaseKind.HOSTS or max_leaves_per_rail < 1):
        raise _bad("max_leaves_per_rail (>= 1) applies to kind=hosts", "max_leaves_per_rail")
    if zone and not Zone.objects.filter(name=zone).exists():
        raise _bad(f"unknown zone {zone!r}", "zone")


def _chunks(n: int) -> list[int]:
    """Whole-GPU chunks per host: 8, 4, 2, 1 (the NVSwitch partition sizes of HGX systems)."""
    out = []
    for size in (8, 4, 2, 1):
        while n >= size:
            out.append(size)
            n -= size
    return out


def _requests(lease: Lease, count: int, start: dt.datetime) -> list[PlacementRequest]:
    base = {"project_id": lease.project_id, "consumer_type": "lease", "start": start, "end": lease.end,
            "gpu_models": (lease.gpu_model,), "zone": lease.zone}
    if lease.kind == LeaseKind.HOSTS:
        per_host = gpus_per_host_max(lease.gpu_model)
        if per_host == 0:
            raise CapacityUnavailable(f"no host has {lease.gpu_model} GPUs", constraint="gpu_model")
        topo = TopologyConstraint(max_leaves_per_rail=lease.max_leaves_per_rail,
                                  one_fabric=bool(lease.max_leaves_per_rail))
        return [PlacementRequest(**base, gpus_per_host=per_host, hosts=count, topology=topo)]
    if lease.kind == LeaseKind.GPUS:
        return [PlacementRequest(**base, gpus_per_host=c) for c in _chunks(count)]
    if lease.kind == LeaseKind.MIG:
        return [PlacementRequest(**base, mig_profile=lease.mig_profile) for _ in range(count)]
    return [PlacementRequest(**base, share_milli=lease.share_milli) for _ in range(count)]


_constraint = refusal_constraint


def _fleet_check(lease: Lease) -> None:
    """The placement rule's "never" (docs/adr/0404-placement-admission.md): 422 `unplaceable` when no capacity
    of the fleet could ever hold the lease (model, hosts and topology, MIG geometry, more GPUs than exist)."""
    try:
        requests = _requests(lease, lease.count, lease.start)
    except CapacityUnavailable as exc:
        raise Unplaceable(exc.detail, reason="gpu_model", explanation=exc.explanation) from exc
    distinct = list(dict.fromkeys(requests))
    if not all(place(r, limit=1).placeable for r in distinct):   # the exact ideal pass only for likely refusals
        fleet_fit(distinct)
    if lease.kind == LeaseKind.GPUS:
        total = gpus_in_fleet(lease.gpu_model, zone=lease.zone)
        if total < lease.count:
            raise Unplaceable(f"The fleet has {total} {lease.gpu_model} GPUs; the lease asks for {lease.count}.",
                              reason="gpu_capacity", explanation={"gpus_in_fleet": total})


class _Rollback(Exception):
    pass


def _fits_at(lease: Lease, t: dt.datetime) -> bool:
    """Whether the lease, moved to start at `t` (same duration), could be claimed: tried and rolled back."""
    moved = copy.copy(lease)
    moved.start, moved.end = t, t + (lease.end - lease.start)
    try:
        with transaction.atomic():
            _claim(moved, moved.count, t)
            raise _Rollback
    except _Rollback:
        return True
    except CapacityUnavailable:
        return False


def _earliest_start(lease: Lease) -> str | None:
    with transaction.atomic():
        t = earliest_fit(_requests(lease, lease.count, lease.start), fits=lambda at: _fits_at(lease, at))
    return t.isoformat() if t else None


def _mode_check(lease: Lease, count: int) -> None:
    """A GPU lease needs `count` GPUs in exclusive mode: when the fleet (the lease's zone) has fewer, no end of
    an allocation makes room, only an operator switching GPUs out of MIG/vGPU mode does. Raises
    `CapacityUnavailable` with constraint ``gpu_mode`` and ``explanation.gpu_mode`` (``gpus_in_mode``,
    ``gpus_in_fleet``, ``requested``); the fleet check (`_fleet_check`) already refused more GPUs than exist."""
    if lease.kind != LeaseKind.GPUS:
        return
    in_mode = gpus_in_fleet(lease.gpu_model, zone=lease.zone, mode="exclusive")
    if in_mode >= count:
        return
    total = gpus_in_fleet(lease.gpu_model, zone=lease.zone)
    where = f" in zone {lease.zone}" if lease.zone else ""
    raise CapacityUnavailable(
        f"The fleet{where} has {total} {lease.gpu_model} GPUs, of which only {in_mode} are in exclusive mode (the "
        f"others are in MIG or vGPU mode); the lease asks for {count} whole GPUs. It fits only once an operator "
        "switches GPUs to exclusive mode, not when allocations end.", constraint="gpu_mode",
        explanation={"filters": [], "gpu_mode": {"gpu_model": lease.gpu_model, "zone": lease.zone,
                                                 "mode": "exclusive", "gpus_in_mode": in_mode,
                                                 "gpus_in_fleet": total, "requested": count}})


def _claim(lease: Lease, count: int, start: dt.datetime) -> None:
    """Claim `count` units of the lease's capacity over [start, lease.end), then check the on-demand reserve.
    Raises `CapacityUnavailable` with ``explanation`` and ``constraint``. A GPU lease is claimed in per-host
    chunks (`_chunks`); when a later chunk finds no host, the placement explanation counts the GPUs the lease's
    own earlier chunks took as not free, so the detail and ``explanation.lease`` (``gpus``, ``claimed_before``,
    ``chunk_gpus``) say so."""
    consumer = ConsumerRef(id=lease.pk, consumer_type="lease", project_id=lease.project_id)
    _mode_check(lease, count)
    _reserve_lock(lease.gpu_model)
    claimed = 0
    for req in _requests(lease, count, start):
        try:
            placement_claim(actor=None, request=req, consumers=consumer)
        except CapacityUnavailable as exc:
            detail, explanation = exc.detail, exc.explanation
            if claimed and lease.kind == LeaseKind.GPUS:
                detail = (f"The lease's first chunks took {claimed} of its {count} {lease.gpu_model} GPUs; no host "
                          f"has {req.gpus_per_host} more free over the window (the counts below include the "
                          f"lease's own chunks): {exc.detail}")
                explanation = {**explanation, "lease": {"gpus": count, "claimed_before": claimed,
                                                        "chunk_gpus": req.gpus_per_host}}
            raise CapacityUnavailable(detail, explanation=explanation,
                                      constraint=_constraint(exc.explanation)) from exc
        claimed += req.gpus_per_host
    _check_reserve(lease, start)


def _reserves(model: str):
    return list(OnDemandReserve.objects.filter(gpu_model=model, gpus__gt=0))


def _reserve_lock(model: str) -> None:
    if _reserves(model):
        advisory_xact_lock(f"reservations:reserve:{model}")


def _check_reserve(lease: Lease, start: dt.datetime) -> None:
    window = DateTimeTZRange(start, lease.end, "[)")
    for r in _reserves(lease.gpu_model):
        if r.zone and lease.zone and r.zone != lease.zone:
            continue
        with connection.cursor() as cur:
            cur.execute(RESERVE_SQL, {"model": r.gpu_model, "zone": r.zone, "window": window})
            total, peak = cur.fetchone()
        if total - peak < r.gpus:
            where = f" in zone {r.zone}" if r.zone else ""
            raise CapacityUnavailable(
                f"The lease would leave {max(total - peak, 0)} {r.gpu_model} GPUs{where} free at its peak; the "
                f"operator keeps {r.gpus} for on-demand work.", constraint="on_demand_reserve",
                explanation={"filters": [], "on_demand_reserve": {"gpu_model": r.gpu_model, "zone": r.zone,
                                                                  "reserve": r.gpus, "total": total,
                                                                  "free_at_peak": total - peak}})


def _spot_notice_start(lease: Lease) -> dt.datetime | None:
    """The start the spot notice (`RESERVATIONS_SPOT_GRACE_S`) gives a lease that has just claimed its capacity:
    now + notice (whole second) when spot instances run on its GPUs and its start is sooner than that, None when
    it keeps its start. A window that ends by then is refused: 409 `capacity_unavailable`, constraint
    ``spot_notice`` (``explanation.spot_notice``: ``notice_s``, ``start``). Reads only; the confirm
    (`_spot_notice`) and the launch check (`lease_check`) both decide with it."""
    from .spot import notice_end, spot_on_lease

    t = notice_end()
    if lease.start >= t or not spot_on_lease(lease):
        return None
    if lease.end <= t:
        raise CapacityUnavailable(
            f"Spot instances run on the GPUs this lease needs and are owed {conf.spot_grace_s()} s of notice; "
            f"the window ends before {t:%Y-%m-%d %H:%M:%S} UTC.", constraint="spot_notice",
            explanation={"filters": [], "spot_notice": {"notice_s": conf.spot_grace_s(), "start": t.isoformat()}})
    return t


def _spot_notice(lease: Lease) -> None:
    """The spot notice holds also for a lease confirmed to start within it (`_spot_notice_start`): the lease
    starts at now + notice (its rows move, `allocations_set_start`; the end stays) and the spot instances are
    told at once (`spot_preempt_for_lease`). The caller saves ``lease.start``; the answer shows the real start.
    Without spot work on its GPUs the lease keeps its start."""
    from .spot import spot_preempt_for_lease

    t = _spot_notice_start(lease)
    if t is None:
        return
    allocations_set_start(consumer_id=lease.pk, old_start=lease.start, new_start=t)
    lease.start = t
    spot_preempt_for_lease(lease)


# ---- quota ----------------------------------------------------------------------------------------------------
def gpu_quota_requests(lease: Lease, count: int | None = None) -> list[tuple[str, int]]:
    """The GPU quota keys `count` (default the lease's count) units of the lease hold, as ``(resource,
    requested)`` for `apps.tenancy.quotas.quota_check_all`: a GPU lease ``gpus:<model>`` × count, a host lease
    ``gpus:<model>`` × hosts × the model's GPUs per host, a MIG lease ``mig_slices:<profile>`` × count; a share
    lease holds no quota-limited resource ([]). A qualified key also checks its base key."""
    count = lease.count if count is None else count
    if lease.kind == LeaseKind.GPUS:
        return [(f"gpus:{lease.gpu_model}", count)]
    if lease.kind == LeaseKind.HOSTS:
        return [(f"gpus:{lease.gpu_model}", count * gpus_per_host_max(lease.gpu_model))]
    if lease.kind == LeaseKind.MIG:
        return [(f"mig_slices:{lease.mig_profile}", count)]
    return []


def _gpu_quota_check(lease: Lease, *, start: dt.datetime, count: int, end: dt.datetime | None = None) -> None:
    """422 `quota_exceeded` when `count` more units of the lease over [start, end) (default its end) would pass a
    GPU quota of its project or organization at the busiest instant of that window (the lease's own ledger rows,
    when it has some there, are counted as held). Takes the organization lock (`quota_check_all`)."""
    quota_check_all(scope=lease.project, requests=gpu_quota_requests(lease, count),
                    window=(start, end or lease.end))


# ---- create -------------------------------------------------------------------------------------------------
def lease_payload(lease: Lease) -> dict:
    return {"id": str(lease.pk), "name": lease.name, "project": str(lease.project_id), "status": lease.status,
            "start": lease.start.isoformat(), "end": lease.end.isoformat(), "kind": lease.kind,
            "gpu_model": lease.gpu_model, "count": lease.count}


def _lease_prepare(*, actor, project, name: str, start, end, kind: str, gpu_model: str, count: int,
                   time_zone: str = "UTC", mig_profile: str = "", share_milli: int = 0, zone: str = "",
                   max_leaves_per_rail: int | None = None, end_action: str = EndAction.STOP,
                   notice_s: int = 3600, sla_tier: str | None = None) -> Lease:
    """The create's checks of the request itself (403; 400 for the name, the window, the capacity, the end
    action, 400 `unknown_sla_tier`). Returns the lease as it would be requested, unsaved; `sla_tier` resolved
    (`apps.billing.selectors.sla_tier_resolve`: default the organization's default tier)."""
    from apps.billing.selectors import sla_tier_resolve

    authorize_project(actor, project, WRITERS)
    if not name or len(name) > 63:
        raise ValidationFailed("name must be 1..63 characters", errors={"name": ["1..63 characters"]})
    s, e = windows.window_parse(start, end, time_zone)
    capacity_validate(kind=kind, gpu_model=gpu_model, count=count, mig_profile=mig_profile, share_milli=share_milli,
                      zone=zone, max_leaves_per_rail=max_leaves_per_rail)
    if end_action not in EndAction.values or not 0 <= notice_s <= MAX_NOTICE_S:
        raise ValidationFailed("invalid end_action or notice_s", errors={"end_action": list(EndAction.values),
                                                                        "notice_s": [f"0..{MAX_NOTICE_S}"]})
    tier = sla_tier_resolve(organization=project.organization, code=sla_tier)
    return Lease(project=project, sla_tier=tier, name=name, start=s, end=e, time_zone=time_zone or "UTC", kind=kind,
                 gpu_model=gpu_model, count=count, mig_profile=mig_profile, share_milli=share_milli, zone=zone,
                 max_leaves_per_rail=max_leaves_per_rail, end_action=end_action, notice_s=notice_s)


def lease_check(*, actor, project, **fields) -> dict:
    """What `lease_create` would answer for these arguments, without writing (docs/adr/0405-launch-checks.md):
    the create's own steps in its order - `_lease_prepare` (403, 400 raised as the create raises them), the
    fleet check (422 `unplaceable`), quota ``leases`` (422 `quota_exceeded`) and the confirm's claim over the
    window (409 `capacity_unavailable`, with ``earliest_start`` from the same trial claims the create uses) and its
    spot notice (`_spot_notice_start`: ``start`` = now + the notice when spot instances run on the claimed GPUs,
    409 `capacity_unavailable` ``spot_notice`` when the window ends by then; nobody is told) - in a transaction
    that is always rolled back. Body: `apps.scheduling.services.check_answer` with ``start``, the start the create
    would confirm (null when it would refuse); ``price`` is the reserved per-GPU price × the lease's GPUs,
    ``estimate_total`` over the window (`selectors.lease_price`)."""
    from apps.core.db import rolled_back
    from apps.core.errors import DomainError
    from apps.scheduling.services import check_answer, check_refusal
    from apps.tenancy.quotas import quota_checks_recorded, quota_report

    from ..selectors import lease_price

    lease = _lease_prepare(actor=actor, project=project, **fields)
    refusal = placement_refusal = None
    earliest = start = None
    with quota_checks_recorded(), rolled_back():
        try:
            _fleet_check(lease)
            with transaction.atomic():
                quota_check(scope=project, resource="leases", requested=1)
                _gpu_quota_check(lease, start=lease.start, count=lease.count)
            with transaction.atomic():
                _claim(lease, lease.count, lease.start)
                start = _spot_notice_start(lease) or lease.start
        except DomainError as exc:
            if not check_refusal(exc):
                raise
            refusal = exc
        quota = quota_report(scope=project, resource="leases", requested=1) + [
            line for resource, requested in gpu_quota_requests(lease)
            for line in quota_report(scope=project, resource=resource, requested=requested,
                                     window=(lease.start, lease.end))]
    if refusal is not None and not isinstance(refusal, Unplaceable | CapacityUnavailable):
        with rolled_back():   # refused by quota: the placement rule still says whether and when it fits
            try:
                _fleet_check(lease)
                with transaction.atomic():
                    _claim(lease, lease.count, lease.start)
                    _spot_notice_start(lease)
            except (Unplaceable, CapacityUnavailable) as exc:
                placement_refusal = exc
    if isinstance(refusal or placement_refusal, CapacityUnavailable):
        with rolled_back():
            earliest = _earliest_start(lease)
    return check_answer(refusal=refusal, placement_refusal=placement_refusal, earliest_start=earliest,
                        quota=quota, start=start if refusal is None else None, price=lease_price(lease))


def lease_create(*, actor, project, name: str, start, end, kind: str, gpu_model: str, count: int,
                 time_zone: str = "UTC", mig_profile: str = "", share_milli: int = 0, zone: str = "",
                 max_leaves_per_rail: int | None = None, end_action: str = EndAction.STOP,
                 notice_s: int = 3600, sla_tier: str | None = None) -> Lease:
    """Request a lease and confirm it at once when its capacity exists for the whole window; otherwise it is
    kept as `rejected` (with the explanation) and 409 `capacity_unavailable` is raised naming the constraint.
    Returns the confirmed lease. 422 `unplaceable` (nothing written) when no capacity of the fleet could ever
    hold it; the 409 carries ``earliest_start``: the first start (same duration) at which it would fit, from the
    ledger's known ends, or null (docs/adr/0404-placement-admission.md)."""
    draft = _lease_prepare(actor=actor, project=project, name=name, start=start, end=end, kind=kind,
                           gpu_model=gpu_model, count=count, time_zone=time_zone, mig_profile=mig_profile,
                           share_milli=share_milli, zone=zone, max_leaves_per_rail=max_leaves_per_rail,
                           end_action=end_action, notice_s=notice_s, sla_tier=sla_tier)
    _fleet_check(draft)
    s, e = draft.start, draft.end
    lease = _lease_request(actor=actor, project=project, name=name, start=s, end=e, time_zone=time_zone or "UTC",
                           kind=kind, gpu_model=gpu_model, count=count, mig_profile=mig_profile,
                           share_milli=share_milli, zone=zone, max_leaves_per_rail=max_leaves_per_rail,
                           end_action=end_action, notice_s=notice_s, sla_tier=draft.sla_tier)
    lease, refused = _lease_confirm(actor=actor, project=project, lease_id=lease.pk)
    if isinstance(refused, QuotaExceeded):
        raise refused
    if refused is not None:
        raise CapacityUnavailable(refused.detail, explanation=refused.explanation, lease=str(lease.pk),
                                  constraint=refused.extra.get("constraint", _constraint(refused.explanation)),
                                  earliest_start=_earliest_start(lease))
    return lease


@atomic_with_retry
def _lease_request(*, actor, project, **fields) -> Lease:
    """The `requested` lease, counted against quota ``leases`` and checked against the GPU quotas over its window
    (first transaction: organization lock, insert; a refusal writes nothing)."""
    quota_check(scope=project, resource="leases", requested=1)
    lease = Lease(project=project, **fields)
    _gpu_quota_check(lease, start=lease.start, count=lease.count)
    lease.save(force_insert=True)
    event_record(actor=actor, action="reservations.lease.request", target=lease,
                 organization=project.organization, after=lease_payload(lease))
    return lease


@atomic_with_retry
def _lease_confirm(*, actor, project, lease_id) -> tuple[Lease, CapacityUnavailable | None]:
    """Claim the requested lease's capacity and confirm it, or reject it with the explanation (second
    transaction: lease row, then the ledger's host rows). A deadlock runs it again, so the lease never stays
    `requested`. The GPU quotas are checked again under the organization lock, taken before the lease row (the
    lock order of every quota-checked write), so a concurrent lease that confirmed since the request is counted:
    a lease that no longer fits its quota is rejected and 422 `quota_exceeded` returned as the refusal.
    Returns (lease, the refusal or None)."""
    requested = Lease.objects.select_related("project").get(pk=lease_id)   # fields fixed while `requested`
    try:
        _gpu_quota_check(requested, start=requested.start, count=requested.count)
        over_quota = None
    except QuotaExceeded as exc:
        over_quota = exc
    lease = Lease.objects.select_for_update(of=("self",)).select_related("project__organization").get(pk=lease_id)
    if over_quota is not None:
        transition(lease, "reject", LEASE_TRANSITIONS, extra={"reason": over_quota.detail[:1000], "explanation": {}})
        event_record(actor=actor, action="reservations.lease.reject", target=lease,
                     organization=project.organization, after={"status": lease.status, "reason": over_quota.detail,
                                                               "constraint": "quota"})
        return lease, over_quota
    try:
        with transaction.atomic():
            _claim(lease, lease.count, lease.start)
            _spot_notice(lease)
            transition(lease, "confirm", LEASE_TRANSITIONS,
                       extra={"confirmed_at": clock.now(), "start": lease.start})
            event_record(actor=actor, action="reservations.lease.confirm", target=lease,
                         organization=project.organization, after={"status": lease.status},
                         event=Event.LEASE_CONFIRMED, payload=lease_payload(lease))
    except CapacityUnavailable as exc:
        transition(lease, "reject", LEASE_TRANSITIONS,
                   extra={"reason": exc.detail[:1000], "explanation": exc.explanation})
        event_record(actor=actor, action="reservations.lease.reject", target=lease,
                     organization=project.organization, after={"status": lease.status, "reason": exc.detail,
                                                               "constraint": exc.extra.get("constraint")})
        return lease, exc
    return lease, None


# ---- update -------------------------------------------------------------------------------------------------
def _immutable(msg: str, field: str):
    return ValidationFailed(msg, code=Code.IMMUTABLE_FIELD, errors={field: [msg]})


def lease_update(*, actor, lease: Lease, name: str | None = None, start=None, end=None,
                 count: int | None = None) -> Lease:
    """Rename, move (before it starts), extend or shrink (`end`), or grow (`count`, a started lease gets the new
    capacity from now). RW-032: a started lease's start cannot move and its end must stay in the future; a
    finished lease can only be renamed; a refused update (400/409) leaves the lease exactly as it was.
    Raises 409 `capacity_unavailable` when the new capacity does not exist, 422 `quota_exceeded` when the moved,
    extended or grown lease would pass a GPU quota at the busiest instant of its (new) window."""
    authorize_project(actor, lease.project, WRITERS)
    with transaction.atomic():
        quota_check_all(scope=lease.project, requests=[])   # the organization lock first, as the confirm takes it
        lease = Lease.objects.select_for_update(of=("self",)).select_related("project__organization").get(pk=lease.pk)
        tz = windows.zone_get(lease.time_zone)
        new_start = windows.parse_instant(start, tz, "start") if start is not None else lease.start
        new_end = windows.parse_instant(end, tz, "end") if end is not None else lease.end
        new_count = lease.count if count is None else int(count)
        before = {"name": lease.name, "start": lease.start, "end": lease.end, "count": lease.count}
        changed = (new_start, new_end, new_count) != (lease.start, lease.end, lease.count)
        if lease.status in LEASE_FINISHED and changed:
            raise _immutable(f"A {lease.status} lease can only be renamed.", "end" if end is not None else "start")
        if name is not None:
            if not name or len(name) > 63:
                raise ValidationFailed("name must be 1..63 characters", errors={"name": ["1..63 characters"]})
            lease.name = name
        if changed and lease.status in LEASE_STARTED:
            _update_started(lease, new_start, new_end, new_count, actor=actor)
        elif changed:
            windows.window_check(new_start, new_end)
            if not 1 <= new_count <= MAX_COUNT[lease.kind]:
                raise _bad(f"count must be 1..{MAX_COUNT[lease.kind]}", "count")
            allocations_release(consumer_id=lease.pk)  # nothing has started: the rows are deleted
            lease.start, lease.end, lease.count = new_start, new_end, new_count
            _gpu_quota_check(lease, start=lease.start, count=lease.count)
            _claim(lease, lease.count, lease.start)
            _spot_notice(lease)
        lease.save(update_fields=["name", "start", "end", "count", "updated_at"])  # status: transitions only
        event_record(actor=actor, action="reservations.lease.update", target=lease,
                     organization=lease.project.organization, before=before,
                     after={"name": lease.name, "start": lease.start, "end": lease.end, "count": lease.count})
    return lease


def _update_started(lease: Lease, new_start, new_end, new_count, *, actor) -> None:
    now = clock.now()
    if new_start != lease.start:
        raise _immutable("The start of a started lease cannot change.", "start")
    if new_end <= now:
        raise windows.InvalidWindow("The end of a started lease must be in the future.",
                                    errors={"end": ["must be in the future"]})
    windows.window_check(lease.start, new_end, check_start=False)
    if new_count < lease.count:
        raise _immutable("A started lease cannot give capacity back; shrink its end or cancel it.", "count")
    if new_end != lease.end:
        grew = new_end > lease.end
        if grew:   # the lease's GPUs over the added time
            _gpu_quota_check(lease, start=lease.end, end=new_end, count=lease.count)
        allocations_set_end(consumer_id=lease.pk, old_end=lease.end, new_end=new_end)
        lease.end = new_end
        if grew:
            _check_reserve(lease, now)
        if lease.status == LeaseStatus.ENDING and new_end - dt.timedelta(seconds=lease.notice_s) > now:
            _renew(lease, actor=actor)
    if new_count > lease.count:
        _gpu_quota_check(lease, start=now, count=new_count - lease.count)
        _claim(lease, new_count - lease.count, now)
        lease.count = new_count


# ---- cancel and lifecycle -------------------------------------------------------------------------------------
def lease_cancel(*, actor, lease: Lease) -> Lease:
    """Cancel a lease not yet finished. A started lease's capacity returns now (its instances are stopped or
    deleted as the lease chose); a future lease's rows are removed. 409 `invalid_state` when finished."""
    authorize_project(actor, lease.project, WRITERS)
    with transaction.atomic():
        lease = Lease.objects.select_for_update(of=("self",)).select_related("project__organization").get(pk=lease.pk)
        before = transition(lease, "cancel", LEASE_TRANSITIONS, extra={"ended_at": clock.now()})
        if before in LEASE_STARTED:
            _end_instances(lease)
        allocations_release(consumer_id=lease.pk)
        event_record(actor=actor, action="reservations.lease.cancel", target=lease,
                     organization=lease.project.organization, before={"status": before},
                     after={"status": lease.status}, event=Event.LEASE_ENDED if before in LEASE_STARTED else "",
                     payload=lease_payload(lease))
    return lease


def _end_instances(lease: Lease) -> int:
    """Stop or delete the lease's instances through compute's services. The lease's release ends their nested
    allocations now, so their GPUs become `dirty` at once (compute's `devices_capacity_released`): the scrub is
    queued by the delete or stop that was just asked, or now for an instance that is already off.

    A bare-metal instance is deleted whatever `end_action` says (docs/adr/1214-bare-metal-in-leases-and-
    clusters.md): its disk is the host's, and the host goes back to the pool, so only an undeploy and Ironic's
    cleaning (with the tenant's exit receipt) can end it; a deploy still running is cancelled by that delete."""
    from apps.compute.models import Instance
    from apps.compute.services import devices as compute_devices
    from apps.compute.services import instances as compute
    from apps.core.errors import InvalidState

    from ..models import InstanceTerms

    n = 0
    ids = InstanceTerms.objects.filter(lease=lease).values_list("instance_id", flat=True)
    for inst in Instance.objects.filter(pk__in=list(ids)).exclude(status=InstanceStatus.DELETED).select_related(
            "flavor"):
        try:
            if inst.status in GONE_STATUSES:
                pass  # already being deleted: only its GPUs' hold below
            elif lease.end_action == EndAction.DELETE or inst.flavor.kind == ProvisioningKind.BAREMETAL:
                compute.instance_delete(actor=None, instance=inst)
                n += 1
            elif inst.status == InstanceStatus.ACTIVE:
                compute.instance_stop(actor=None, instance=inst, hard=False)
                n += 1
        except InvalidState:
            pass
        inst.refresh_from_db()
        compute_devices.devices_capacity_released(inst, reason=f"lease {lease.pk} ended")
    return n


def _step(pk, action: str, fn, *, wait: bool = False) -> bool:
    """Run one lease transition in its own transaction; a failure rolls it back whole (nothing half done, the
    lease keeps its state and holding) and is retried on the next tick, without stopping the other leases.
    A lease locked by another worker is skipped, or with `wait` waited for (then its state is read again)."""
    try:
        with transaction.atomic():
            lease = (Lease.objects.select_for_update(skip_locked=not wait, of=("self",))
                     .select_related("project__organization").filter(pk=pk).first())
            if lease is None or lease.status not in LEASE_TRANSITIONS[action][0]:
                return False
            fn(lease)
            return True
    except Exception:  # noqa: BLE001 - logged and retried next tick
        log.exception("lease_step_failed", extra={"lease": str(pk), "action": action})
        return False


def _abandon(lease: Lease) -> None:
    allocations_release(consumer_id=lease.pk)
    transition(lease, "reject", LEASE_TRANSITIONS, extra={"reason": "confirmation did not complete"})
    event_record(actor=None, action="reservations.lease.reject", target=lease,
                 organization=lease.project.organization, after={"status": lease.status, "reason": lease.reason})


def _activate(lease: Lease) -> None:
    from .spot import spot_preempt_for_lease

    spot_preempt_for_lease(lease)
    transition(lease, "activate", LEASE_TRANSITIONS, extra={"activated_at": clock.now()})
    event_record(actor=None, action="reservations.lease.activate", target=lease,
                 organization=lease.project.organization, after={"status": lease.status},
                 event=Event.LEASE_STARTING, payload=lease_payload(lease))


def _notice(lease: Lease) -> None:
    transition(lease, "notice", LEASE_TRANSITIONS)
    event_record(actor=None, action="reservations.lease.notice", target=lease,
                 organization=lease.project.organization, after={"status": lease.status},
                 event=Event.LEASE_ENDING_SOON, payload=lease_payload(lease))


def _renew(lease: Lease, *, actor) -> None:
    """An `ending` lease extended past its notice goes back to `active` (transition ``renew``, audited); the next
    tick gives a new ending notice before the new end."""
    before = transition(lease, "renew", LEASE_TRANSITIONS)
    event_record(actor=actor, action="reservations.lease.renew", target=lease,
                 organization=lease.project.organization, before={"status": before}, after={"status": lease.status})


def _finish(lease: Lease) -> None:
    before = transition(lease, "finish", LEASE_TRANSITIONS, extra={"ended_at": lease.end})
    _end_instances(lease)
    allocations_release(consumer_id=lease.pk, at=lease.end)
    event_record(actor=None, action="reservations.lease.finish", target=lease,
                 organization=lease.project.organization, before={"status": before}, after={"status": lease.status},
                 event=Event.LEASE_ENDED, payload=lease_payload(lease))


def leases_end_due() -> int:
    """Finish every started lease whose end has passed, as the next beat tick would (waiting for a tick that is
    finishing one). Placement for a window that starts now calls it first (`hooks.placement_hook`): a lease's
    rows end at its end while its instances run until the tick stops or deletes them, so without it their GPUs
    would look free, and clean, for up to a tick. Finished, the lease holds its instances' GPUs dirty until they
    are scrubbed (docs/compute.md, "Scrub"). Returns how many it finished."""
    ended = Lease.objects.filter(status__in=LEASE_STARTED, end__lte=clock.now()).values_list("pk", flat=True)
    return sum(_step(pk, "finish", _finish, wait=True) for pk in ended)


def leases_advance() -> dict:
    """One beat tick: spot notices for leases starting within the grace period, activations (start reached),
    ending notices (end - notice_s reached), ends (end reached), due spot preemptions. Each lease moves in its
    own transaction (row lock, SKIP LOCKED: two workers never move one lease twice). Returns counts."""
    from .spot import spot_preempt_due, spot_preempt_for_lease

    now = clock.now()
    out = {"noticed_spot": 0, "activated": 0, "ending": 0, "ended": 0, "preempted": 0, "abandoned": 0}
    stale = Lease.objects.filter(status=LeaseStatus.REQUESTED, created_at__lte=now - dt.timedelta(minutes=5))
    for pk in stale.values_list("pk", flat=True):  # the create request died between its two transactions
        out["abandoned"] += _step(pk, "reject", _abandon)
    soon = Lease.objects.filter(status=LeaseStatus.CONFIRMED, start__lte=now + dt.timedelta(seconds=conf.spot_grace_s()))
    for lease in soon.select_related("project__organization"):
        try:
            with transaction.atomic():
                out["noticed_spot"] += spot_preempt_for_lease(lease)
        except Exception:  # noqa: BLE001 - logged and retried next tick
            log.exception("lease_spot_notice_failed", extra={"lease": str(lease.pk)})
    for pk in Lease.objects.filter(status=LeaseStatus.CONFIRMED, start__lte=now).values_list("pk", flat=True):
        out["activated"] += _step(pk, "activate", _activate)
    for pk, end, notice in Lease.objects.filter(status=LeaseStatus.ACTIVE, end__lte=now + dt.timedelta(
            seconds=MAX_NOTICE_S)).values_list("pk", "end", "notice_s"):
        if end - dt.timedelta(seconds=notice) <= now < end:
            out["ending"] += _step(pk, "notice", _notice)
    for pk in Lease.objects.filter(status__in=LEASE_STARTED, end__lte=now).values_list("pk", flat=True):
        out["ended"] += _step(pk, "finish", _finish)
    out["preempted"] = spot_preempt_due()
    return out
