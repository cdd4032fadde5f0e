"""Remediation: move a tenant's on-demand VM off a failed GPU or host, under its project's consent mode
(docs/health.md, "Remediation"; ADR 0210).

Opened at ingest (`remediations_open`, in the event's transaction) for every instance the event touched
(`HealthEventImpact`) when the classification row names `recreate_vm`:

- `auto`: a checkpoint notice (webhook + e-mail `remediation.notice`, and the remediation in the tenant's API
  with `deadline_at`) and status `notice`; `remediations_advance` (beat) starts the re-create at the deadline;
- `propose`: `proposed` (notice `remediation.proposed`); it moves once a project member approves
  (`remediation_approve`);
- `off`: `held` (notice `remediation.held`): never moved; the instance stays on the failed device and its
  downtime counts against the SLA until staff return the device to service.

A cluster member moves the same way, placed where it joins the other members' topology (the gang re-place,
ADR 0217: same fabric, the cluster's limits, one member per host; it waits, with the placement's reason, while no
such host is free); its notices name the cluster and the other members, which keep running.

Also `held`: an instance with a volume on a host-local tier (it cannot follow), one inside a lease whose
capacity on the failed host no spare host replaced (`services.lease_spares`, run first at ingest; a lease that got
a spare re-creates its VMs there as on-demand ones move), and any while the blast-radius breaker of the host's component is
open. A spot instance is `held` too, and interrupted at once through the spot market's preemption
(`_spot_preempt`): spot is stopped, never moved. The move is compute's `instance.recreate` operation
(`apps.compute.services.instances.instance_recreate`); `remediations_advance` records how it finished.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from apps.compute.models import Instance
from apps.compute.services.instances import instance_recreate
from apps.compute.services.placement import (
    instance_placement_request,
    instance_replacement_request,
    placement_admit_for,
)
from apps.compute.services.volumes import instance_placement_pins
from apps.compute.states import InstanceStatus
from apps.core.clock import now
from apps.core.errors import DomainError
from apps.core.transitions import transition
from apps.operations.models import TERMINAL, OperationStatus
from apps.reservations.services.notify import event_record
from apps.reservations.states import Event
from apps.scheduling.models import Allocation
from apps.scheduling.placement import place
from apps.scheduling.services import placement_admit
from apps.tenancy.authz import authorize_project
from apps.tenancy.models import ProjectRole

from ..models import HealthEvent, Remediation, RemediationPolicy
from ..states import REMEDIATION_TRANSITIONS, ConsentMode, RemediationStatus
from .lease_spares import NO_SPARE, lease_held_on

log = logging.getLogger("gpucloud.health")
WRITERS = (ProjectRole.ADMIN, ProjectRole.MEMBER)
S = RemediationStatus


def policy_for(project) -> tuple[str, int]:
    """(consent mode, notice seconds) of `project`: its `RemediationPolicy`, else the settings' defaults."""
    row = RemediationPolicy.objects.filter(project=project).first()
    if row is not None:
        return row.consent_mode, row.notice_seconds
    return (
        getattr(settings, "HEALTH_CONSENT_MODE_DEFAULT", ConsentMode.AUTO),
        getattr(settings, "HEALTH_NOTICE_SECONDS_DEFAULT", 900),
    )


def remediation_policy_set(*, actor, project, consent_mode: str, notice_seconds: int | None = None):
    """Set `project`'s consent mode (and notice length; default: keep, else the settings' default). Project
    admins only (403). Applies to remediations opened from now on. Audited."""
    authorize_project(actor, project, (ProjectRole.ADMIN,))
    mode, notice = policy_for(project)
    with transaction.atomic():
        row, _ = RemediationPolicy.objects.update_or_create(
            project=project,
            defaults={
                "consent_mode": consent_mode,
                "notice_seconds": notice if notice_seconds is None else notice_seconds,
            },
        )
        event_record(
            actor=actor,
            action="health.remediation_policy.set",
            target=row,
            organization=project.organization,
            project=project,
            before={"consent_mode": mode, "notice_seconds": notice},
            after={"consent_mode": row.consent_mode, "notice_seconds": row.notice_seconds},
        )
    return row


def _cluster(inst: Instance | None) -> dict:
    """A cluster member's remediation names its cluster and the other members (ADR 0217: they keep running, but
    a collective job over the gang stops with the lost rank, so the tenant restarts it from its checkpoint)."""
    if inst is None or inst.cluster_id is None:
        return {}
    peers = (
        Instance.objects.filter(cluster_id=inst.cluster_id)
        .exclude(pk=inst.pk)
        .exclude(status=InstanceStatus.DELETED)
        .order_by("name")
        .values_list("name", flat=True)
    )
    return {"cluster": {"id": str(inst.cluster_id), "name": inst.cluster.name, "other_members": list(peers)}}


def _payload(rem: Remediation, inst: Instance | None) -> dict:
    return {
        **_cluster(inst),
        "remediation": str(rem.pk),
        "instance": str(rem.resource_id),
        "name": inst.name if inst else "",
        "project": str(rem.project_id),
        "status": rem.status,
        "consent_mode": rem.consent_mode,
        "deadline_at": rem.deadline_at.isoformat() if rem.deadline_at else None,
        "reason": rem.reason,
        "classification": rem.event.classification,
    }


def _notify(
    rem: Remediation, inst: Instance | None, action: str, event: str, before: dict | None = None
) -> None:
    event_record(
        actor=None,
        action=action,
        target=rem,
        organization=rem.project.organization,
        project=rem.project,
        before=before,
        after=_payload(rem, inst),
        event=event,
        payload=_payload(rem, inst),
    )


SPOT_REASON = "spot: preempted now (the spot market's interruption), not moved"


def _spot_preempt(inst: Instance, event: HealthEvent) -> None:
    """A spot VM on the failed device is interrupted now through the spot market's own mechanism
    (`spot_interrupt`: the owner's `spot.preemption_notice`, the instance's `interruption_at`), with no grace:
    its GPU or host is gone. The reservations beat (`spot_preempt_due`) deletes it, which releases the
    allocation and queues the scrub; its downtime until then is the incident's."""
    from apps.reservations.models import InstanceTerms
    from apps.reservations.services.spot import spot_interrupt

    terms = InstanceTerms.objects.select_related("instance__project__organization").get(instance_id=inst.pk)
    spot_interrupt(terms, at=now(), reason=f"health: {event.classification} on the instance's GPU or host")


def _lease_of(inst: Instance):
    """The lease the instance draws from (its live rows nest in the lease's), else None."""
    return (
        Allocation.objects.filter(consumer_id=inst.pk, parent__isnull=False)
        .filter(Q(period__upper_inf=True) | Q(period__endswith__gt=now()))
        .values_list("parent__consumer_id", flat=True)
        .first()
    )


def _hold_reason(inst: Instance) -> str:
    from apps.storage.models import VolumeAttachment

    if inst.flavor.kind != "vm":
        return f"a {inst.flavor.kind} instance: only VMs are re-created"
    lease_id = _lease_of(inst)
    if lease_id is not None and lease_held_on(lease_id, inst.host_id):
        return f"inside a lease: {NO_SPARE} replaced the failed one (the lease stays held)"
    from apps.reservations.models import InstanceTerms

    if InstanceTerms.objects.filter(instance_id=inst.pk, market="spot").exists():
        return SPOT_REASON
    if VolumeAttachment.objects.filter(instance_id=inst.pk, volume__volume_type__host_local=True).exists():
        return "a volume on a host-local tier cannot follow the VM"
    return ""


FENCED_NOTICE = (
    "the host was fenced (powered off): the VM stopped with it and nothing is left to checkpoint, so it is "
    "re-created at once"
)


def remediations_open(
    *, event: HealthEvent, held_reason: str = "", lease_id=None, fenced: bool = False
) -> list[Remediation]:
    """Open one remediation per active instance the event touched (none when one is open already). Call in
    the ingest's transaction. `held_reason` (e.g. the breaker) holds them all. `lease_id`: only the instances
    inside that lease (a lease that got its spare after the event, `lease_spares_backfill`). `fenced`: the host
    was powered off (ADR 0218): an `auto` one's deadline is now (no checkpoint notice to wait out) and its reason
    says why; `propose` and `off` are as usual. Returns those opened."""
    opened = []
    ids = list(
        event.impacts.filter(resource_type__in=("instance", "cluster_member")).values_list("resource_id", flat=True)
    )
    for inst in Instance.objects.filter(
        pk__in=ids, status=InstanceStatus.ACTIVE, host_id=event.host_id
    ).select_related("project__organization", "flavor"):
        if Remediation.objects.filter(
            resource_id=inst.pk, status__in=[S.NOTICE, S.PROPOSED, S.APPROVED, S.RUNNING]
        ).exists():
            continue
        if lease_id is not None and _lease_of(inst) != lease_id:
            continue
        mode, notice = policy_for(inst.project)
        reason = held_reason or _hold_reason(inst)
        if not reason and mode == ConsentMode.OFF:
            reason = "consent mode off: never moved"
        at = now()
        if reason:
            status, deadline, what = S.HELD, None, Event.REMEDIATION_HELD
        elif mode == ConsentMode.PROPOSE:
            status, deadline, what = S.PROPOSED, None, Event.REMEDIATION_PROPOSED
        else:
            status, deadline, what = S.NOTICE, at + dt.timedelta(seconds=notice), Event.REMEDIATION_NOTICE
        if fenced and status != S.HELD:
            reason = FENCED_NOTICE
            deadline = at if status == S.NOTICE else None
        if reason == SPOT_REASON and not held_reason:
            _spot_preempt(inst, event)
        rem = Remediation.objects.create(
            project=inst.project,
            event=event,
            resource_id=inst.pk,
            from_host_id=event.host_id,
            consent_mode=mode,
            status=status,
            reason=reason[:500],
            deadline_at=deadline,
            finished_at=at if status == S.HELD else None,
        )
        _notify(rem, inst, "health.remediation.open", what)
        opened.append(rem)
    return opened


def vms_move_off(*, event: HealthEvent, fenced: bool = False) -> dict:
    """Move the VMs the event touched off its device (a row with `recreate_vm`, the breaker closed): a lease
    on the failed capacity moves to a free spare first (`lease_spares_replace`), then one remediation per VM
    (`remediations_open`). Call in the event's transaction (at ingest, or when the host's fence is confirmed).
    Returns what to add to the event's `applied`: `remediations` and, when a lease moved (or could not),
    `lease_spares`."""
    from .lease_spares import lease_spares_replace

    out = {}
    swaps = lease_spares_replace(event=event)  # first: the leases' VMs then re-create onto the spare
    if swaps:
        out["lease_spares"] = swaps
    out["remediations"] = [str(r.pk) for r in remediations_open(event=event, fenced=fenced)]
    return out


def remediation_approve(*, actor, remediation: Remediation) -> Remediation:
    """A project member approves a `proposed` remediation (or moves a `notice` one before its deadline): it
    starts now when capacity allows, else at the next `remediations_advance`. 409
    `invalid_state` (with `allowed_states`) in any other status; 403 for a reader. Audited."""
    authorize_project(actor, remediation.project, WRITERS)
    with transaction.atomic():
        rem = (
            Remediation.objects.select_for_update()
            .select_related("event", "project__organization")
            .get(pk=remediation.pk)
        )
        before = transition(
            rem, "approve", REMEDIATION_TRANSITIONS, extra={"approved_by": actor, "approved_at": now()}
        )
        event_record(
            actor=actor,
            action="health.remediation.approve",
            target=rem,
            organization=rem.project.organization,
            project=rem.project,
            before={"status": before},
            after={"status": rem.status},
        )
        _start(rem, actor=actor)
    return rem


def _start(rem: Remediation, *, actor=None) -> bool:
    """Start the re-create of a due remediation (row locked by the caller). Cancels it when the instance is no
    longer active on the failed host; leaves it waiting when the fleet has no capacity for it now."""
    inst = (
        Instance.objects.select_for_update(of=("self",))
        .select_related("flavor")
        .filter(pk=rem.resource_id)
        .first()
    )
    if inst is None or inst.status != InstanceStatus.ACTIVE or inst.host_id != rem.from_host_id:
        transition(
            rem,
            "cancel",
            REMEDIATION_TRANSITIONS,
            extra={"finished_at": now(), "reason": "the instance was deleted, stopped or moved first"},
        )
        _notify(rem, inst, "health.remediation.cancel", Event.REMEDIATION_FINISHED)
        return False
    waiting = None  # where its volumes let it go (a zoned volume: its zone); inside a lease: on the lease's capacity
    if inst.cluster_id is not None:  # the gang re-place: on the members' fabric, within the cluster's topology
        try:  # queue=True: no capacity now is an answer (its reason), not a refusal; one that can never fit raises
            admission = placement_admit(request=instance_replacement_request(inst), queue=True)
            waiting = admission.reason if admission.queued else None
        except DomainError as exc:
            waiting = exc.detail
    elif _lease_of(inst) is not None:
        if not place(instance_placement_request(inst), limit=1).placeable:
            waiting = "the lease holds no free capacity for the VM"
    else:
        try:
            placement_admit_for(
                inst.flavor, inst.project_id, pins=instance_placement_pins(inst), network=inst.network
            )
        except DomainError as exc:
            waiting = exc.detail
    if waiting is not None:
        if rem.reason != f"waiting for capacity: {waiting}"[:500]:
            Remediation.objects.filter(pk=rem.pk).update(reason=f"waiting for capacity: {waiting}"[:500])
        return False
    op = instance_recreate(
        actor=actor, instance=inst, reason=f"health: {rem.event.classification} ({rem.pk})"
    )
    transition(
        rem, "start", REMEDIATION_TRANSITIONS, extra={"operation": op, "started_at": now(), "reason": ""}
    )
    return True


def _finish(rem: Remediation) -> None:
    op = rem.operation
    inst = Instance.objects.filter(pk=rem.resource_id).first()
    if op is None or op.status not in TERMINAL:
        return
    if op.status == OperationStatus.SUCCEEDED:
        transition(
            rem,
            "succeed",
            REMEDIATION_TRANSITIONS,
            extra={"finished_at": now(), "to_host_id": inst.host_id if inst else None},
        )
    elif (
        op.error_code == "capacity_unavailable"
        and inst is not None
        and inst.status == InstanceStatus.ACTIVE
        and inst.host_id == rem.from_host_id
    ):  # the claim failed before the VM left the old host: it runs there still; wait for capacity again
        transition(
            rem,
            "requeue",
            REMEDIATION_TRANSITIONS,
            extra={"reason": f"waiting for capacity: {op.error_detail}"[:500]},
        )
        _notify(rem, inst, "health.remediation.requeue", "")
        return
    elif op.status == OperationStatus.CANCELLED:
        transition(
            rem,
            "cancel",
            REMEDIATION_TRANSITIONS,
            extra={"finished_at": now(), "reason": f"operation cancelled: {op.error_code}"[:500]},
        )
    else:
        transition(
            rem,
            "fail",
            REMEDIATION_TRANSITIONS,
            extra={"finished_at": now(), "reason": f"{op.error_code}: {op.error_detail}"[:500]},
        )
    _notify(rem, inst, "health.remediation.finish", Event.REMEDIATION_FINISHED)


def remediations_advance(*, limit: int = 200) -> dict:
    """Beat (and after an approval): start `notice` remediations past their deadline and `approved` ones, and
    record how running ones finished. Each row in its own transaction, locked with SKIP LOCKED, so concurrent
    runs never start one twice. Returns counts {started, finished}."""
    due = (
        Remediation.objects.filter(status=S.NOTICE, deadline_at__lte=now())
        | Remediation.objects.filter(status=S.APPROVED)
        | Remediation.objects.filter(status=S.RUNNING)
    )
    started = finished = 0
    for pk in list(due.order_by("created_at").values_list("pk", flat=True)[:limit]):
        with transaction.atomic():
            rem = (
                Remediation.objects.select_for_update(skip_locked=True, of=("self",))
                .select_related("event", "project__organization", "operation")
                .filter(pk=pk)
                .first()
            )
            if rem is None:
                continue
            if rem.status == S.RUNNING:
                before = rem.status
                _finish(rem)
                finished += rem.status != before
            elif rem.status == S.APPROVED or (rem.status == S.NOTICE and rem.deadline_at <= now()):
                started += _start(rem)
    return {"started": started, "finished": finished}


__all__ = [
    "policy_for",
    "remediation_approve",
    "remediation_policy_set",
    "remediations_advance",
    "remediations_open",
    "vms_move_off",
]
