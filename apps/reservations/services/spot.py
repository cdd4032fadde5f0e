"""Spot preemption. A spot instance (market ``spot``) holds ledger rows flagged `spot`: they never block a lease
or on-demand work. When a lease is about to start on its GPUs (within `RESERVATIONS_SPOT_GRACE_S`; a lease
confirmed to start sooner starts after that notice instead, `leases._spot_notice`), an instance of an active
lease needs the lease's GPUs it runs on (`spot_reclaim_for_lease`), or a queued on-demand request needs its host,
the instance is *chosen*: `InstanceTerms.interruption_at` is set (the lease start, or now + grace otherwise),
the owner gets a ``spot.preemption_notice`` (webhook / e-mail) and sees
`interruption_reason` on the instance; at `interruption_at` it is deleted through compute's delete workflow
(domain destroyed, devices reset/released, allocations released)."""
from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange

from apps.compute.states import GONE_STATUSES
from apps.core import clock
from apps.scheduling.models import Allocation

from .. import conf
from ..models import InstanceTerms
from ..states import Event, Market
from .notify import event_record


def spot_interrupt(terms: InstanceTerms, *, at: dt.datetime, reason: str) -> bool:
    """Choose a spot instance for preemption at `at` (idempotent: an instance already chosen keeps its time)."""
    updated = InstanceTerms.objects.filter(pk=terms.pk, interruption_at__isnull=True).update(
        interruption_at=at, interruption_reason=reason[:500], updated_at=clock.now())
    if not updated:
        return False
    inst = terms.instance
    event_record(actor=None, action="reservations.spot.interrupt", target=inst,
                 organization=inst.project.organization, after={"interruption_at": at, "reason": reason},
                 event=Event.SPOT_PREEMPTION,
                 payload={"instance": str(inst.pk), "name": inst.name, "interruption_at": at.isoformat(),
                          "reason": reason})
    return True


def notice_end() -> dt.datetime:
    """The first instant (whole second) a spot instance told now may be asked to go: now + the notice."""
    t = clock.now() + dt.timedelta(seconds=conf.spot_grace_s())
    return t.replace(microsecond=0) + dt.timedelta(seconds=1) if t.microsecond else t


def _lease_gpu_ids(lease) -> list:
    return list(Allocation.objects.filter(consumer_id=lease.pk, parent__isnull=True, gpu__isnull=False)
                .values_list("gpu_id", flat=True).distinct())


def spot_on_lease(lease) -> bool:
    """Whether a spot instance holds a GPU of `lease` during its window and was not already told to go by
    ``lease.start`` (it is owed a notice before the lease starts)."""
    window = DateTimeTZRange(lease.start, lease.end, "[)")
    victims = (Allocation.objects.filter(spot=True, gpu_id__in=_lease_gpu_ids(lease), period__overlap=window)
               .values_list("consumer_id", flat=True).distinct())
    return (InstanceTerms.objects.filter(instance_id__in=list(victims), market=Market.SPOT)
            .exclude(interruption_at__lte=lease.start).exists())


def spot_reclaim_for_lease(lease, request, *, gpus_needed: int) -> int:
    """An instance of the started `lease` needs GPUs of the lease that spot instances run on (spot may use a
    lease's idle GPUs): when `request` (the instance's `PlacementRequest`, inside the lease) cannot be placed now
    and spot instances hold GPUs of the lease, those on the lease's host with the most spot GPUs are chosen,
    newest first, until `gpus_needed` GPUs (counting the ones already told to go) would free; they go after the
    notice (`RESERVATIONS_SPOT_GRACE_S`), and the instance's create waits for them (`hooks.placement_hook`).
    Returns how many were newly chosen."""
    from apps.scheduling.placement import place

    if place(request, limit=1).placeable:
        return 0
    now = clock.now()
    rows = (Allocation.objects.filter(spot=True, gpu_id__in=_lease_gpu_ids(lease),
                                      period__overlap=DateTimeTZRange(now, None, "[)"))
            .values_list("host_id", "consumer_id", "gpu_id"))
    by_host: dict = {}
    for host, consumer, gpu in rows:
        by_host.setdefault(host, {}).setdefault(consumer, set()).add(gpu)
    if not by_host:
        return 0
    _host, consumers = max(by_host.items(), key=lambda kv: sum(len(g) for g in kv[1].values()))
    terms = list(InstanceTerms.objects.filter(instance_id__in=list(consumers), market=Market.SPOT,
                                              preempted_at__isnull=True)
                 .select_related("instance__project__organization").order_by("-created_at"))
    freed = sum(len(consumers[t.instance_id]) for t in terms if t.interruption_at is not None)
    at = notice_end()
    reason = ("The lease these GPUs are reserved for needs them for its own instance (spot instances may use a "
              "lease's idle GPUs until its owner launches there).")
    chosen = 0
    for t in terms:
        if freed >= gpus_needed:
            break
        if t.interruption_at is None:
            chosen += spot_interrupt(t, at=at, reason=reason)
            freed += len(consumers[t.instance_id])
    return chosen


def spot_reclaim_pending(lease) -> dt.datetime | None:
    """The latest interruption time of spot instances that were told to go and still hold GPUs of `lease`
    (None when none do): an instance of the lease waits for them."""
    now = clock.now()
    consumers = (Allocation.objects.filter(spot=True, gpu_id__in=_lease_gpu_ids(lease),
                                           period__overlap=DateTimeTZRange(now, None, "[)"))
                 .values_list("consumer_id", flat=True).distinct())
    times = InstanceTerms.objects.filter(instance_id__in=list(consumers), market=Market.SPOT,
                                         interruption_at__isnull=False).values_list("interruption_at", flat=True)
    return max(times, default=None)


def spot_preempt_for_lease(lease) -> int:
    """Choose every spot instance holding a GPU of `lease` during its window; they go at the lease start (or now
    if it has passed). Returns how many were newly chosen."""
    window = DateTimeTZRange(lease.start, lease.end, "[)")
    gpus = Allocation.objects.filter(consumer_id=lease.pk, gpu__isnull=False).values_list("gpu_id", flat=True)
    victims = (Allocation.objects.filter(spot=True, gpu_id__in=list(gpus), period__overlap=window)
               .values_list("consumer_id", flat=True).distinct())
    at = max(lease.start, clock.now())
    reason = (f"Capacity reserved by a lease starting {lease.start:%Y-%m-%d %H:%M} UTC needs this instance's GPUs "
              f"(spot instances never block reserved capacity).")
    n = 0
    for terms in InstanceTerms.objects.filter(instance_id__in=list(victims), market=Market.SPOT,
                                              interruption_at__isnull=True).select_related(
                                                  "instance__project__organization"):
        n += spot_interrupt(terms, at=at, reason=reason)
    return n


def spot_preempt_for_request(*, host_ids, gpus_needed: int, model: str, why: str) -> int:
    """Choose spot instances on one of `host_ids` (the host with the most spot GPUs of `model`) until
    `gpus_needed` GPUs would free; they go after the grace period. Returns how many were chosen."""
    rows = (Allocation.objects.filter(spot=True, host_id__in=list(host_ids), gpu__model=model,
                                      period__upper_inf=True)
            .values_list("host_id", "consumer_id"))
    by_host: dict = {}
    for host, consumer in rows:
        by_host.setdefault(host, []).append(consumer)
    if not by_host:
        return 0
    host, consumers = max(by_host.items(), key=lambda kv: len(kv[1]))
    at = clock.now() + dt.timedelta(seconds=conf.spot_grace_s())
    chosen = 0
    freed = 0
    for terms in InstanceTerms.objects.filter(instance_id__in=set(consumers), market=Market.SPOT,
                                              interruption_at__isnull=True).select_related(
                                                  "instance__project__organization").order_by("-created_at"):
        if freed >= gpus_needed:
            break
        chosen += spot_interrupt(terms, at=at, reason=why)
        freed += consumers.count(terms.instance_id)
    return chosen


def spot_preempt_due() -> int:
    """Delete chosen spot instances whose interruption time has come. Returns how many were preempted."""
    from apps.compute.services import instances as compute

    now = clock.now()
    n = 0
    due = InstanceTerms.objects.filter(market=Market.SPOT, interruption_at__lte=now, preempted_at__isnull=True)
    for pk in list(due.values_list("pk", flat=True)):
        with transaction.atomic():
            terms = (InstanceTerms.objects.select_for_update(skip_locked=True)
                     .select_related("instance__project__organization").filter(pk=pk, preempted_at__isnull=True)
                     .first())
            if terms is None:
                continue
            inst = terms.instance
            if inst.status not in GONE_STATUSES:
                compute.instance_delete(actor=None, instance=inst)
            InstanceTerms.objects.filter(pk=pk).update(preempted_at=now, updated_at=now)
            event_record(actor=None, action="reservations.spot.preempt", target=inst,
                         organization=inst.project.organization,
                         after={"preempted_at": now, "reason": terms.interruption_reason})
            n += 1
    return n
