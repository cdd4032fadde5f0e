"""Metering: turn usage-source intervals into immutable, idempotent usage records; incidents into downtime.

Rules: docs/billing.md (metering, downtime and SLA); case RW-059 (windows aligned to the metering period).
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from django.db import transaction
from django.db.models import F, Max, OuterRef, Q, Subquery

from apps.core.clock import now
from apps.core.errors import ValidationFailed
from apps.tenancy.models import Organization, Project

from .. import conf
from ..errors import Code
from ..models import DowntimeInterval, UsageRecord
from ..registry import UsageInterval, placement_resolvers, usage_sources
from ..states import PricingModel


def window_validate(start: dt.datetime, end: dt.datetime) -> None:
    """400 `window_not_aligned` unless `[start, end)` is non-empty and both ends fall on metering-period
    boundaries (BILLING_METERING_PERIOD_SECONDS, 3600 s by default; RW-059: 10:30–11:30 is refused,
    10:00–12:00 accepted)."""
    step = conf.get("BILLING_METERING_PERIOD_SECONDS")
    if start.tzinfo is None or end.tzinfo is None or end <= start:
        raise ValidationFailed("The window must be a non-empty, timezone-aware [start, end).",
                               code=Code.WINDOW_NOT_ALIGNED)
    for value in (start, end):
        if int(value.timestamp()) % step or value.microsecond:
            raise ValidationFailed(f"{value.isoformat()} is not aligned to the {step} s metering period.",
                                   code=Code.WINDOW_NOT_ALIGNED, period_seconds=step)


def _hour_pieces(start: dt.datetime, end: dt.datetime) -> Iterable[tuple[dt.datetime, dt.datetime]]:
    step = conf.get("BILLING_METERING_PERIOD_SECONDS")
    cursor = start
    while cursor < end:
        boundary = dt.datetime.fromtimestamp((int(cursor.timestamp()) // step + 1) * step, dt.UTC)
        piece_end = min(boundary, end)
        yield cursor, piece_end
        cursor = piece_end


def usage_record_ingest(*, actor=None, source: str, intervals: Iterable[UsageInterval],
                        window_start: dt.datetime, window_end: dt.datetime) -> int:
    """Record `intervals` of usage source `source`, clipped to the aligned window, as metering-period pieces.

    Each piece's `source_key` is ``source:interval-key:piece-start``; an existing key is skipped, so calling
    this again for the same window (or an overlapping aligned one) inserts nothing twice. Returns the number of
    records inserted. 400 `window_not_aligned`, `validation_error` (unknown pricing model, project not in the
    organization).
    """
    window_validate(window_start, window_end)
    intervals = list(intervals)
    projects = dict(Project.objects.filter(id__in={i.project_id for i in intervals})
                    .values_list("id", "organization_id"))
    tiers = dict(Organization.objects.filter(id__in={i.organization_id for i in intervals})
                 .values_list("id", "default_sla_tier"))
    rows = []
    for interval in intervals:
        if interval.pricing_model not in PricingModel.values:
            raise ValidationFailed(f"Unknown pricing model {interval.pricing_model!r}.")
        if str(projects.get(interval.project_id, "")) != str(interval.organization_id):
            raise ValidationFailed(f"Interval {interval.key!r}: project is not in the organization.")
        start = max(interval.start, window_start)
        end = min(interval.end or window_end, window_end)
        for piece_start, piece_end in _hour_pieces(start, end):
            rows.append(_record(source, interval, piece_start, piece_end, tiers[interval.organization_id]))
    keys = [row.source_key for row in rows]
    existing = set()
    for i in range(0, len(keys), 5000):
        existing |= set(UsageRecord.objects.filter(source_key__in=keys[i:i + 5000])
                        .values_list("source_key", flat=True))
    fresh = [row for row in rows if row.source_key not in existing]
    with transaction.atomic():
        UsageRecord.objects.bulk_create(fresh, batch_size=2000, ignore_conflicts=True)
    return len(fresh)


def _record(source: str, interval: UsageInterval, start, end, default_tier: str) -> UsageRecord:
    return UsageRecord(
        organization_id=interval.organization_id, project_id=interval.project_id,
        resource_type=interval.resource_type, resource_id=str(interval.resource_id), sku=interval.sku,
        pricing_model=interval.pricing_model, sla_tier=interval.sla_tier or default_tier, start=start, end=end,
        run_id=f"{source}:{interval.run_key or interval.key}", source=source, source_key=f"{source}:{interval.key}:{start.isoformat()}",
        gpu_model=interval.gpu_model, gpu_equivalents=interval.gpu_equivalents, units=interval.units,
        commitment_amount=interval.commitment_amount, commitment_start=interval.commitment_start,
        commitment_end=interval.commitment_end, recorded_at=now())


def usage_record_collect(*, actor=None, window_start: dt.datetime, window_end: dt.datetime,
                         sources: Iterable[str] | None = None) -> dict[str, int]:
    """Ask every registered usage source (or the named ones) for `[window_start, window_end)` and record the
    result. Returns {source: records inserted}. 400 `unknown_usage_source`, `window_not_aligned`."""
    window_validate(window_start, window_end)
    registered = usage_sources()
    names = list(sources) if sources is not None else sorted(registered)
    unknown = [name for name in names if name not in registered]
    if unknown:
        raise ValidationFailed(f"Unknown usage sources: {', '.join(unknown)}.", code=Code.UNKNOWN_USAGE_SOURCE)
    return {name: usage_record_ingest(actor=actor, source=name, intervals=registered[name](window_start, window_end),
                                      window_start=window_start, window_end=window_end) for name in names}


def last_closed_boundary() -> dt.datetime:
    """The most recent metering-period boundary at or before now (UTC)."""
    step = conf.get("BILLING_METERING_PERIOD_SECONDS")
    return dt.datetime.fromtimestamp(int(now().timestamp()) // step * step, dt.UTC)


def usage_record_collect_closed(*, actor=None, window_start: dt.datetime, window_end: dt.datetime) -> dict[str, int]:
    """Collect every source over `[window_start, window_end)` clipped to the closed metering periods (an open
    period is collected once it closes). Both ends must be aligned; returns {} when nothing has closed yet."""
    window_end = min(window_end, last_closed_boundary())
    if window_end <= window_start:
        return {}
    return usage_record_collect(actor=actor, window_start=window_start, window_end=window_end)


def downtime_sync(*, window_start: dt.datetime, window_end: dt.datetime, stale_only: bool = False) -> int:
    """Derive per-resource downtime from provider-fault inventory incidents overlapping the window.

    Each incident (host or one GPU) is asked of every placement resolver; the overlap of incident and placement
    becomes a DowntimeInterval keyed by (incident, resource, placement start, and the placement's part when it
    names one), carrying the placement's `part` and `units` (a part of a resource: only that share is down), so
    syncing again updates the end of a still-open incident instead of adding rows. An incident's rows that no
    placement gives any more are removed, as are the rows of incidents no longer marked provider-at-fault.
    With `stale_only` (the invoice preview, at request time) a closed incident whose rows already reach its end
    is skipped: it was synced after it closed (an invoice run, the nightly preview run, or its correction, which
    syncs at once), so only new, open and changed incidents cost a resolver call and writes.
    Returns the number of intervals written.
    """
    from apps.inventory.models import Incident

    DowntimeInterval.objects.filter(incident__provider_at_fault=False).delete()
    incidents = Incident.objects.filter(provider_at_fault=True, start__lt=window_end).filter(
        Q(end__isnull=True) | Q(end__gt=window_start)).order_by("start", "id")  # one lock order for every caller
    if stale_only:
        last = (DowntimeInterval.objects.filter(incident=OuterRef("pk")).values("incident")
                .annotate(last=Max("end")).values("last"))
        incidents = incidents.annotate(synced_until=Subquery(last)).filter(  # never synced: synced_until NULL
            Q(end__isnull=True) | Q(synced_until__isnull=True) | Q(synced_until__lt=F("end"))
            | Q(synced_until__gt=F("end")))
    written = 0
    for incident in incidents:
        inc_end = incident.end or min(window_end, now())
        keys = []
        for resolver in placement_resolvers().values():
            for placement in resolver(incident.host_id, incident.gpu_id, incident.start, inc_end):
                start = max(incident.start, placement.start)
                end = min(inc_end, placement.end or inc_end)
                if end <= start:
                    continue
                key = f"incident:{incident.id}:{placement.resource_type}:{placement.resource_id}:" \
                      f"{placement.start.isoformat()}" + (f":{placement.part}" if placement.part else "")
                DowntimeInterval.objects.update_or_create(
                    source_key=key,
                    defaults={"resource_type": placement.resource_type, "resource_id": str(placement.resource_id),
                              "start": start, "end": end, "incident": incident, "reason": incident.reason[:500],
                              "part": placement.part, "units": placement.units})
                keys.append(key)
                written += 1
        DowntimeInterval.objects.filter(incident=incident).exclude(source_key__in=keys).delete()
    return written
