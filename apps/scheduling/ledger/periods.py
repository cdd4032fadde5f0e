"""Move the end of a consumer's allocations (a lease extended or shrunk), with the rows nested in them, or the
start of a consumer's allocations later (a lease confirmed to start after the spot notice).

Added for `apps.reservations` (lease extend / shrink, spot notice). Same rules as `core`: one transaction, host locks in id
order, the exclusion constraints reject an extension into another holder's period, countable sums are
re-checked at their peak over the added time, the usage summary is recomputed.
"""
from __future__ import annotations

import datetime as dt
import uuid

from django.db import IntegrityError, connection, transaction
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange
from django.db.models import F, Q

from apps.core import clock

from ..errors import CapacityUnavailable
from ..models import SLICE_CLASSES, Allocation, Consumer
from .core import EXCLUSION_VIOLATION, _check_countables, lock_hosts, refresh_usage

_SET_END = "UPDATE scheduling_allocation SET period = tstzrange(lower(period), %s, '[)') WHERE id = ANY(%s)"
_SET_START = "UPDATE scheduling_allocation SET period = tstzrange(%s, upper(period), '[)') WHERE id = ANY(%s)"


def allocations_set_end(*, consumer_id: uuid.UUID, old_end: dt.datetime, new_end: dt.datetime) -> int:
    """Rows of the consumer whose period ends at `old_end` get ``end = new_end``; rows nested in them that
    ended at `old_end` follow an extension, rows nested in them that run past `new_end` are cut at it (and
    deleted when they start at or after it). The nested consumers' own top-level rows (an instance's vCPUs and
    memory from the host's pool) follow the same way, so each keeps one period. Returns the consumer rows changed.

    Raises `CapacityUnavailable` (409) when the extension overlaps another holder."""
    with transaction.atomic():
        c = Consumer.objects.select_for_update().filter(id=consumer_id).first()
        if c is None or new_end == old_end:
            return 0
        rows = list(Allocation.objects.filter(consumer=c, period__endswith=old_end))
        if not rows:
            return 0
        ids = [r.id for r in rows]
        children = Allocation.objects.filter(parent_id__in=ids)
        # the top-level rows of the nested consumers (an instance's vCPUs and memory, drawn from the host's pool
        # where the lease holds none) move with their nested rows: a consumer's allocations keep one period
        nested = Allocation.objects.filter(
            consumer_id__in=children.values("consumer_id"), parent__isnull=True).exclude(consumer=c)
        hosts = lock_hosts(list({r.host_id for r in rows} | set(nested.values_list("host_id", flat=True))),
                           clock.now())
        try:
            with transaction.atomic(), connection.cursor() as cur:
                if new_end < old_end:
                    moved = Allocation.objects.filter(Q(id__in=children.values("id")) | Q(id__in=nested.values("id")))
                    moved.filter(period__startswith__gte=new_end).delete()
                    cut = list(moved.filter(Q(period__upper_inf=True) | Q(period__endswith__gt=new_end))
                               .values_list("id", flat=True))
                    cur.execute(_SET_END, [new_end, cut])
                    cur.execute(_SET_END, [new_end, ids])
                else:
                    follow = list(children.filter(period__endswith=old_end).values_list("id", flat=True))
                    siblings = list(nested.filter(period__endswith=old_end).values_list("id", flat=True))
                    cur.execute(_SET_END, [new_end, ids])
                    cur.execute(_SET_END, [new_end, follow + siblings])
        except IntegrityError as exc:
            if getattr(exc.__cause__, "sqlstate", None) == EXCLUSION_VIOLATION:
                raise CapacityUnavailable("a GPU or slice range is already allocated in the added time",
                                          reason="slice_overlap") from exc
            raise
        if new_end > old_end:
            fresh = list(Allocation.objects.filter(id__in=ids + siblings)
                         .exclude(resource_class__in=sorted(SLICE_CLASSES)))
            _check_countables(fresh, hosts, DateTimeTZRange(old_end, new_end, "[)"))
        refresh_usage(list(hosts), clock.now())
        Consumer.objects.filter(id=c.id).update(generation=F("generation") + 1, updated_at=clock.now())
        return len(ids)


def allocations_set_start(*, consumer_id: uuid.UUID, old_start: dt.datetime, new_start: dt.datetime) -> int:
    """Rows of the consumer whose period starts at `old_start` start at `new_start` instead. Only later starts
    (the periods shrink, so no exclusion constraint or countable sum can newly fail), for a consumer that has not
    started: rows nested in them would lose their holder, so they are refused. Returns the consumer rows changed
    (0 when nothing starts at `old_start`).

    Raises `ValueError` when `new_start` is not after `old_start`, not before a row's end, or rows are nested
    in the rows that would move."""
    if new_start <= old_start:
        raise ValueError("allocations_set_start only moves a start later")
    with transaction.atomic():
        c = Consumer.objects.select_for_update().filter(id=consumer_id).first()
        if c is None:
            return 0
        rows = list(Allocation.objects.filter(consumer=c, period__startswith=old_start))
        if not rows:
            return 0
        if any(r.period.upper is not None and r.period.upper <= new_start for r in rows):
            raise ValueError("the new start is not before the end of every row")
        ids = [r.id for r in rows]
        hosts = lock_hosts(list({r.host_id for r in rows}), clock.now())
        if Allocation.objects.filter(parent_id__in=ids).exists():
            raise ValueError("rows are nested in the allocations whose start would move")
        with connection.cursor() as cur:
            cur.execute(_SET_START, [new_start, ids])
        refresh_usage(list(hosts), clock.now())
        Consumer.objects.filter(id=c.id).update(generation=F("generation") + 1, updated_at=clock.now())
        return len(ids)
