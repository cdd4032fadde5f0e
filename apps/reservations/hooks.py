"""The functions reservations plugs into other apps (registered by `integrations.register`):

* compute's placement hook (`apps.compute.services.placement.register_placement_hook`): leases whose end has
  passed are finished first (their instances' GPUs held dirty, not free for the beat tick's lag); an instance with
  `InstanceTerms` draws from its lease (nested allocations, window up to the lease end; it waits while spot
  instances told to give the lease's GPUs back still hold them) or is placed as spot; an
  instance whose `QueuedRequest` is still waiting keeps its create operation waiting (StepWait) with its position
  and reason, and fails with `queue_expired` once it expired;
* compute's cluster wait hook (`cluster_queue_wait`): the same for a cluster that is an entry of the queue;
* billing's usage registry (``reservations.lease``): lease windows as reserved usage;
* the tenancy quota counter ``leases`` (unfinished leases).
"""
from __future__ import annotations

import dataclasses

from apps.core import clock
from apps.core.errors import DomainError

from .errors import Code, LeaseNotUsable
from .states import LEASE_FINISHED, LEASE_STARTED, Market, QueueStatus


class QueueExpired(DomainError):
    code, status, title = Code.QUEUE_EXPIRED.value, 409, "Queued request expired"


def placement_hook(instance, request):
    """Adjust compute's `PlacementRequest` for `instance` (see module doc). Raises `StepWait` while queued. Leases
    whose end has passed are finished first (`leases_end_due`), so their instances' GPUs are held, not free."""
    from apps.operations.workflows import StepWait

    from . import conf
    from .models import InstanceTerms, QueuedRequest
    from .services.leases import leases_end_due

    leases_end_due()

    q = QueuedRequest.objects.filter(instance_id=instance.pk).first()
    if q is not None and q.status == QueueStatus.EXPIRED:
        raise QueueExpired(f"No capacity before the queue timeout ({q.expires_at:%Y-%m-%d %H:%M:%S} UTC): {q.reason}")
    if q is not None and q.status == QueueStatus.WAITING:
        if q.expires_at <= clock.now():
            raise QueueExpired(f"No capacity before the queue timeout: {q.reason}")
        raise StepWait(conf.queue_poll_s(), f"queued: {q.reason or 'waiting for capacity'}")
    terms = InstanceTerms.objects.filter(instance_id=instance.pk).select_related("lease").first()
    if terms is None:
        return request
    if terms.market == Market.SPOT:
        return dataclasses.replace(request, spot=True)
    if terms.market == Market.LEASE:
        lease = terms.lease
        if lease.status not in LEASE_STARTED:
            raise LeaseNotUsable(f"The lease is {lease.status}.", current_state=lease.status)
        request = lease_placement_request(request, lease)
        _wait_for_reclaimed_spot(lease, request)
        return request
    return request


def lease_placement_request(request, lease):
    """`request` drawn from `lease`: nested in its rows (``lease_id``), up to its end."""
    return dataclasses.replace(request, lease_id=lease.pk, end=lease.end)


def _wait_for_reclaimed_spot(lease, request) -> None:
    """While spot instances told to give the lease's GPUs back still hold them and the request cannot be placed
    without them, the placement step waits (StepWait, with their interruption time) instead of failing."""
    from apps.operations.workflows import StepWait
    from apps.scheduling.placement import place

    from . import conf
    from .services.spot import spot_reclaim_pending

    until = spot_reclaim_pending(lease)
    if until is not None and not place(request, limit=1).placeable:
        raise StepWait(conf.queue_poll_s(), f"waiting for spot instances on the lease's GPUs to leave (notice "
                                            f"until {until:%Y-%m-%d %H:%M:%S} UTC)")


def cluster_queue_wait(cluster) -> None:
    """Compute's cluster wait hook: while the cluster's queue entry waits, its claim step waits (StepWait, with
    the reason); once the entry expired the create fails with `queue_expired`. Nothing to do without an entry
    or once the queue placed it (its members then have their hosts)."""
    from apps.operations.workflows import StepWait

    from . import conf
    from .models import QueuedRequest

    q = QueuedRequest.objects.filter(cluster_id=cluster.pk).first()
    if q is None:
        return
    if q.status == QueueStatus.EXPIRED or (q.status == QueueStatus.WAITING and q.expires_at <= clock.now()):
        raise QueueExpired(f"No capacity for the whole cluster before the queue timeout: {q.reason}")
    if q.status == QueueStatus.WAITING:
        raise StepWait(conf.queue_poll_s(), f"queued: {q.reason or 'waiting for capacity'}")


def lease_quota_usage(*, organization, project=None, qualifier=None) -> int:
    """Tenancy quota counter ``leases``: leases requested, confirmed or running (not finished)."""
    from .models import Lease

    qs = Lease.objects.exclude(status__in=LEASE_FINISHED)
    return qs.filter(project=project).count() if project is not None else qs.filter(
        project__organization=organization).count()

