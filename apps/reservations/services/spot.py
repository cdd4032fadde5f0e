"""Spot preemption. A spot instance (market ``spot``) holds ledger rows flagged `spot`: they never block a lease
or on-demand work. When a lease is about to start on its GPUs (within `RESERVATIONS_SPOT_GRACE_S`), or a queued
on-demand request needs its host, the instance is *chosen*: `InstanceTerms.interruption_at` is set (the lease
start, or now + grace for on-demand), the owner gets a ``spot.preemption_notice`` (webhook / e-mail) and sees
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
