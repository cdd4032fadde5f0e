"""Instance requests with capacity terms, and the on-demand queue.

`instance_request_create` creates the instance through compute's `instance_create` (same validation, quotas,
Idempotency-Key and create operation) and records its `InstanceTerms` (on-demand, spot, or inside a lease). With
``queue_timeout_s > 0`` it also records a `QueuedRequest`: the instance's create operation then waits at its
placement step (compute's placement hook, `apps.reservations.hooks.placement_hook`) until `queue_process` places it, in queue
order, or the timeout passes (the create fails with `queue_expired` and the instance goes to `error`).

Queue order: `priority` (the project's `QueuePriority`, higher first), then fair share (the organization holding
the fewest GPUs now goes first), then age. `queue_process` runs after every request, every beat tick and after
capacity frees; it tries every waiting request in that order (a smaller request behind a large one that cannot
fit yet may go first: backfill). When the head request cannot be placed because spot instances hold GPUs, those
are chosen for preemption (grace period, notification).
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from django.db import transaction

from apps.compute.models import Instance
from apps.compute.services import instances as compute
from apps.compute.states import UNPLACED_STATUSES
from apps.core import clock
from apps.core.errors import QuotaExceeded, ValidationFailed
from apps.core.references import reference_not_found
from apps.core.tasks import enqueue_on_commit
from apps.core.transitions import transition
from apps.operations.runner import operation_deadline_set
from apps.scheduling.errors import CapacityUnavailable

from .. import conf
from ..errors import LeaseNotUsable
from ..models import InstanceTerms, Lease, QueuedRequest, QueuePriority
from ..states import LEASE_STARTED, QUEUE_TRANSITIONS, Market, QueueStatus
from .notify import event_record


def _lease_for(project, lease_id) -> Lease:
    lease = Lease.objects.filter(pk=lease_id, project=project).first() if lease_id else None
    if lease is None:
        raise reference_not_found("lease")
    if lease.status not in LEASE_STARTED:
        raise LeaseNotUsable(f"Instances can be created in an active lease; this one is {lease.status}.",
                             current_state=lease.status)
    return lease


def _gpus(flavor) -> int:
    return flavor.gpu_count if flavor.gpu_form == "gpu" else (1 if flavor.gpu_form in ("mig", "vgpu", "share") else 0)


def instance_request_create(*, actor, project, name: str, flavor_id, image_id, ssh_key_ids: Sequence = (),
                            user_data: str = "", market: str = Market.ON_DEMAND, lease_id=None,
                            queue_timeout_s: int = 0, request_id: str = ""):
    """Create an instance with capacity terms. Returns (instance, operation, terms, queued request or None).
    400 for a bad market / timeout, 404 `not_found` for a lease not in the project, 409 `lease_not_usable` for a
    lease that is not active, 409 `capacity_unavailable` (with ``lease``) when the lease cannot hold the instance
    now (`_lease_room_check`); compute's own errors otherwise. Nothing is written when it refuses."""
    if market not in Market.values or (market == Market.LEASE) != bool(lease_id):
        raise ValidationFailed("market is on_demand, spot, or lease (with lease)",
                               errors={"market": ["on_demand | spot | lease (lease requires `lease`)"]})
    if not 0 <= queue_timeout_s <= conf.queue_max_timeout_s():
        raise ValidationFailed("queue_timeout_s out of range",
                               errors={"queue_timeout_s": [f"0..{conf.queue_max_timeout_s()} seconds"]})
    with transaction.atomic():
        lease = _lease_for(project, lease_id) if market == Market.LEASE else None
        inst, op = compute.instance_create(
            actor=actor, project=project, name=name, flavor_id=flavor_id, image_id=image_id,
            ssh_key_ids=ssh_key_ids, user_data=user_data, request_id=request_id, gpu_quota=lease is None,
            admit=market == Market.ON_DEMAND, queue=bool(queue_timeout_s))
        terms = InstanceTerms.objects.create(instance=inst, project=project, market=market, lease=lease)
        if lease is not None and not _reclaim_lease_gpus(inst, lease):
            _lease_room_check(inst, lease)
        queued = None
        if queue_timeout_s:
            queued = _enqueue(inst, op, queue_timeout_s,
                              QueuedRequest.objects.filter(instance=inst).values_list("reason", flat=True).first())
        event_record(actor=actor, action="reservations.instance_terms.create", target=inst,
                     organization=project.organization,
                     after={"market": market, "lease": str(lease.pk) if lease else None,
                            "queue_timeout_s": queue_timeout_s})
    return inst, op, terms, queued


def _reclaim_lease_gpus(inst: Instance, lease: Lease) -> int:
    """An instance of an active lease that spot instances keep off the lease's idle GPUs has them told to go
    (after the notice, `spot.spot_reclaim_for_lease`); its create operation waits until they are gone
    (`hooks.placement_hook`). Chosen here, in the request's committed transaction, since a waiting step rolls its
    own writes back."""
    from .spot import spot_reclaim_for_lease

    return spot_reclaim_for_lease(lease, _in_lease_request(inst, lease), gpus_needed=max(_gpus(inst.flavor), 1))


def _in_lease_request(inst: Instance, lease: Lease):
    """The placement request of `inst` drawn from `lease` (as its create will place it)."""
    from apps.compute.services.placement import placement_request_for
    from apps.compute.services.volumes import instance_placement_pins

    from ..hooks import lease_placement_request

    return lease_placement_request(placement_request_for(
        inst.flavor, inst.project_id, pins=instance_placement_pins(inst), network=inst.network,
        policy=inst.placement_policy), lease)


def _lease_room_check(inst: Instance, lease: Lease) -> None:
    """An instance the lease cannot hold now (its hosts are taken by the lease's other instances, or none of
    them can take the flavor: a bare-metal flavor in a lease of hypervisor hosts) is refused at the request:
    409 `capacity_unavailable` with ``lease``, ``constraint`` and the placement ``explanation``, in the request's
    transaction, so nothing is written. Nothing inside a lease waits for capacity, so its create would only fail
    at its placement step. Not asked while spot instances were just told to give the lease's GPUs back (the
    create waits for them, `hooks.placement_hook`)."""
    from apps.scheduling.placement import place
    from apps.scheduling.services.admission import refusal_constraint

    request = _in_lease_request(inst, lease)
    if place(request, limit=1).placeable:
        return
    explanation = place(request, limit=1, explain=True).explanation
    blocking = [f"{f['filter']} ({f['removed']} host{'s' if f['removed'] != 1 else ''})"
                for f in explanation.get("filters", []) if f.get("removed")]
    raise CapacityUnavailable(
        "The lease has no room for this instance now: " + ("; ".join(blocking) or "no host of the lease fits"),
        explanation=explanation, constraint=refusal_constraint(explanation), lease=str(lease.pk))


def _enqueue(inst: Instance, op, timeout_s: int, reason: str | None = "") -> QueuedRequest:
    """Record (or re-time) the instance's waiting request; its create operation waits at its placement step
    until the queue places it or it expires."""
    project = inst.project
    expires = clock.now() + dt.timedelta(seconds=timeout_s)
    prio = QueuePriority.objects.filter(project=project).values_list("priority", flat=True).first() or 0
    queued, _ = QueuedRequest.objects.update_or_create(
        instance=inst, defaults={"project": project, "organization": project.organization, "priority": prio,
                                 "gpus": _gpus(inst.flavor), "expires_at": expires, "reason": (reason or "")[:1000]})
    operation_deadline_set(operation=op, deadline_at=expires + dt.timedelta(seconds=900))
    from ..tasks import queue_process_task

    enqueue_on_commit(queue_process_task, queue="provisioning")
    return queued


def queue_join(*, actor, instance: Instance, operation, reason: str) -> bool:
    """Compute's queue hook: a create with `queue: true` that the fleet cannot hold now joins the on-demand queue
    for `RESERVATIONS_QUEUE_MAX_TIMEOUT_S` (a request with its own `queue_timeout_s` re-times it)."""
    _enqueue(instance, operation, conf.queue_max_timeout_s(), reason)
    event_record(actor=actor, action="reservations.queue.join", target=instance,
                 organization=instance.project.organization, after={"reason": reason[:500]})
    return True


def cluster_queue_join(*, actor, cluster, operation, reason: str) -> bool:
    """Compute's cluster queue hook: a cluster create with `queue: true` that the fleet cannot hold now becomes
    one entry of the on-demand queue (same order as instances: priority, fair share, age; weight = all its
    GPUs) for `RESERVATIONS_QUEUE_MAX_TIMEOUT_S`; the queue places the whole gang at once or not at all."""
    project = cluster.project
    expires = clock.now() + dt.timedelta(seconds=conf.queue_max_timeout_s())
    prio = QueuePriority.objects.filter(project=project).values_list("priority", flat=True).first() or 0
    QueuedRequest.objects.update_or_create(
        cluster=cluster, defaults={"project": project, "organization": project.organization, "priority": prio,
                                   "gpus": _gpus(cluster.flavor) * cluster.size, "expires_at": expires,
                                   "reason": (reason or "")[:1000]})
    operation_deadline_set(operation=operation, deadline_at=expires + dt.timedelta(seconds=900))
    event_record(actor=actor, action="reservations.queue.join", target=cluster, organization=project.organization,
                 after={"reason": reason[:500], "size": cluster.size})
    from ..tasks import queue_process_task

    enqueue_on_commit(queue_process_task, queue="provisioning")
    return True


def _ordered_waiting() -> list[QueuedRequest]:
    waiting = list(QueuedRequest.objects.filter(status=QueueStatus.WAITING).select_related(
        "organization", "instance__flavor", "instance__project", "cluster"))
    usage = _gpus_held({q.organization_id for q in waiting})
    return sorted(waiting, key=lambda q: (-q.priority, usage.get(q.organization_id, 0), q.created_at, q.pk))


def _gpus_held(org_ids: set) -> dict:
    """{organization id: whole GPUs held now} (top-level ledger rows, as the `gpus` quota counts), one query."""
    from django.db.models import Count, Q

    from apps.scheduling.models import Allocation

    if not org_ids:
        return {}
    now = clock.now()
    rows = (Allocation.objects.filter(Q(period__contains=now), parent__isnull=True, resource_class="gpu",
                                      project__organization_id__in=org_ids)
            .values_list("project__organization_id").annotate(n=Count("id")))
    return dict(rows)


def queue_position_for(*, project, flavor) -> int:
    """Compute's queue-position hook (launch checks): the 1-based place a request of `project` joining now would
    take in queue order (priority, then fair share, then age: it is the youngest, so it goes behind every waiting
    request that does not rank strictly lower)."""
    waiting = list(QueuedRequest.objects.filter(status=QueueStatus.WAITING).values_list("priority", "organization_id"))
    prio = QueuePriority.objects.filter(project=project).values_list("priority", flat=True).first() or 0
    usage = _gpus_held({org for _p, org in waiting} | {project.organization_id})
    mine = (-prio, usage.get(project.organization_id, 0))
    return 1 + sum(1 for p, org in waiting if (-p, usage.get(org, 0)) <= mine)


def queue_positions() -> dict:
    """{queued request id: 1-based position} of the waiting requests."""
    return {q.pk: i for i, q in enumerate(_ordered_waiting(), start=1)}


def queue_expire(q: QueuedRequest) -> None:
    transition(q, "expire", QUEUE_TRANSITIONS)
    event_record(actor=None, action="reservations.queue.expire", target=q.instance or q.cluster,
                 organization=q.organization, after={"status": q.status, "reason": q.reason})
    _kick(q.instance) if q.instance_id else _kick_cluster(q.cluster)


def _kick(inst: Instance) -> None:
    """Run the instance's create operation now (it re-checks its queued request at the placement step)."""
    from apps.operations.tasks import operation_run_step_task

    op = compute.current_operation(inst)
    if op is not None:
        enqueue_on_commit(operation_run_step_task, str(op.pk), queue="provisioning")


def _kick_cluster(cluster) -> None:
    """Run the cluster's create operation now (its claim step re-checks the queue entry)."""
    from apps.operations.selectors import operation_latest_for
    from apps.operations.tasks import operation_run_step_task

    op = operation_latest_for(target_type="compute.cluster", target_id=cluster.pk)
    if op is not None:
        enqueue_on_commit(operation_run_step_task, str(op.pk), queue="provisioning")


def _try_place_cluster(q: QueuedRequest) -> bool:
    from apps.compute.services.clusters import cluster_members_claim
    from apps.compute.states import ClusterStatus

    cluster = q.cluster
    if cluster.status != ClusterStatus.PENDING:
        transition(q, "cancel", QUEUE_TRANSITIONS)
        return False
    try:
        with transaction.atomic():
            transition(q, "place", QUEUE_TRANSITIONS, extra={"placed_at": clock.now()})
            cluster_members_claim(actor=None, cluster=cluster)
    except (CapacityUnavailable, QuotaExceeded) as exc:
        q.status = QueueStatus.WAITING
        QueuedRequest.objects.filter(pk=q.pk).update(reason=exc.detail[:1000],
                                                     explanation=getattr(exc, "explanation", {}),
                                                     updated_at=clock.now())
        q.reason = exc.detail[:1000]
        return False
    event_record(actor=None, action="reservations.queue.place", target=cluster, organization=q.organization,
                 after={"status": q.status, "size": cluster.size})
    _kick_cluster(cluster)
    return True


def _try_place(q: QueuedRequest) -> bool:
    if q.cluster_id:
        return _try_place_cluster(q)
    from apps.compute.services.placement import instance_place_and_claim

    inst = Instance.objects.select_for_update(of=("self",)).select_related("flavor").get(pk=q.instance_id)
    if inst.status not in UNPLACED_STATUSES or inst.host_id is not None:
        transition(q, "cancel", QUEUE_TRANSITIONS)
        return False
    op = compute.current_operation(inst)
    try:
        with transaction.atomic():
            transition(q, "place", QUEUE_TRANSITIONS, extra={"placed_at": clock.now()})
            instance_place_and_claim(actor=None, instance=inst, operation=op)
    except (CapacityUnavailable, QuotaExceeded) as exc:
        q.status = QueueStatus.WAITING
        QueuedRequest.objects.filter(pk=q.pk).update(reason=exc.detail[:1000],
                                                     explanation=getattr(exc, "explanation", {}),
                                                     updated_at=clock.now())
        q.reason = exc.detail[:1000]
        if isinstance(exc, CapacityUnavailable):
            _preempt_spot(q, exc)
        return False
    event_record(actor=None, action="reservations.queue.place", target=inst, organization=q.organization,
                 after={"status": q.status, "host": str(inst.host_id)})
    _kick(inst)
    return True


def _preempt_spot(q: QueuedRequest, exc: CapacityUnavailable) -> None:
    from apps.scheduling.models import Allocation

    from .spot import spot_preempt_for_request

    flavor = q.instance.flavor
    terms = InstanceTerms.objects.filter(instance_id=q.instance_id).first()
    if flavor.gpu_form != "gpu" or not flavor.gpu_model or (terms and terms.market != Market.ON_DEMAND):
        return
    if InstanceTerms.objects.filter(market=Market.SPOT, interruption_at__isnull=False, preempted_at__isnull=True,
                                    instance__flavor__gpu_model=flavor.gpu_model).exists():
        return  # spot capacity is already on its way out for the queue
    hosts = Allocation.objects.filter(spot=True, period__upper_inf=True).values_list("host_id", flat=True)
    spot_preempt_for_request(host_ids=set(hosts), gpus_needed=flavor.gpu_count, model=flavor.gpu_model,
                             why=f"On-demand work queued for {flavor.gpu_model} GPUs needs this host "
                                 "(spot instances are preempted for on-demand and reserved work).")


def queue_process() -> dict:
    """Expire due requests, then try to place every waiting request in queue order. Returns counts."""
    now = clock.now()
    out = {"placed": 0, "expired": 0, "waiting": 0}
    for q in _ordered_waiting():
        with transaction.atomic():
            fresh = QueuedRequest.objects.select_for_update(skip_locked=True, of=("self",)).filter(
                pk=q.pk, status=QueueStatus.WAITING).select_related("instance", "cluster", "organization").first()
            if fresh is None:
                continue
            if fresh.expires_at <= now:
                queue_expire(fresh)
                out["expired"] += 1
            elif _try_place(fresh):
                out["placed"] += 1
            else:
                out["waiting"] += 1
    return out


def queued_request_cancel_for(inst: Instance) -> None:
    """Cancel the instance's waiting request (its instance was deleted)."""
    q = QueuedRequest.objects.filter(instance=inst, status=QueueStatus.WAITING).first()
    if q is not None:
        transition(q, "cancel", QUEUE_TRANSITIONS)
