"""Host conditions (cordon, drain, maintenance, faulty, available) and GPU faults, with incidents.

Each action: compare-and-set state change (`states.HOST_TRANSITIONS`), reason and time recorded on the host,
an audit event, and incident bookkeeping in the same transaction. Entering `faulty` opens an Incident
(`provider_at_fault` defaults to True); leaving `faulty` closes it at the same instant. Billing reads closed and
open incidents as SLA downtime (docs/fleet.md, docs/billing.md).
"""
from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Callable

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.errors import Conflict, ValidationFailed
from apps.core.transitions import transition

from ..errors import GpuScrubPending
from ..models import Gpu, Host, Incident
from ..states import HOST_TRANSITIONS, GpuHealth, HostState
from .scrub import host_dirty_gpus

AUDIT_ACTIONS = {
    "cordon": "inventory.host.cordon", "drain": "inventory.host.drain", "maintenance": "inventory.host.maintenance",
    "mark_faulty": "inventory.host.mark_faulty", "mark_available": "inventory.host.mark_available",
    "retire": "inventory.host.retire", "enroll_complete": "inventory.host.enrolled",
}


def _reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ValidationFailed("A reason is required.", code="reason_required", errors={"reason": ["required"]})
    return reason[:500]


def _effective_at(at: dt.datetime | None, *, not_before: dt.datetime | None, field: str = "at") -> dt.datetime:
    """The instant a condition took effect: `at` (staff may record a fault noticed earlier) or now.

    Raises ValidationFailed (`invalid_time`, on `field`) for a naive time, a time in the future or one before the
    host's/GPU's last change, so incidents never overlap or run backwards.
    """
    current = now()
    if at is None:
        return current
    if at.tzinfo is None:
        raise ValidationFailed(f"`{field}` must carry a time zone.", code="invalid_time",
                               errors={field: ["naive time"]})
    if at > current:
        raise ValidationFailed(f"`{field}` is in the future.", code="invalid_time", errors={field: ["in the future"]})
    if not_before is not None and at < not_before:
        raise ValidationFailed(f"`{field}` is before the last condition change ({not_before.isoformat()}).",
                               code="invalid_time", errors={field: ["before the last change"]})
    return at


def host_condition_set(*, actor, host: Host, action: str, reason: str, provider_at_fault: bool = True,
                       at: dt.datetime | None = None) -> Host:
    """Apply `action` (a key of HOST_TRANSITIONS) with `reason`, effective `at` (default now; see `_effective_at`).

    Raises InvalidState (409) from a wrong state, ValidationFailed (400) for a bad reason or time.
    """
    reason = _reason(reason)
    with transaction.atomic():
        last_change = Host.objects.select_for_update().filter(pk=host.pk).values_list(
            "state_changed_at", flat=True).get()
        at = _effective_at(at, not_before=last_change)
        before = transition(host, action, HOST_TRANSITIONS, field="state",
                            extra={"state_reason": reason, "state_changed_at": at})
        if before == HostState.FAULTY and host.state != HostState.FAULTY:
            Incident.objects.filter(host=host, gpu__isnull=True, end__isnull=True).update(end=at, updated_at=at)
        if host.state == HostState.FAULTY:
            Incident.objects.create(host=host, start=at, reason=reason, provider_at_fault=provider_at_fault)
        audit_record(actor=actor, action=AUDIT_ACTIONS[action], target=host,
                     before={"state": before}, after={"state": host.state, "reason": reason})
        if host.state == HostState.AVAILABLE and Host.objects.filter(pk=host.pk, spare=True).exists():
            _spare_ready(host)  # a spare back in service
    return host


#: Called inside the transaction that made a host a free spare candidate: staff put it in the spare pool
#: (`host_spare_set`), or a spare came back to `available` (`host_condition_set`), with the host. Registered by
#: health (a lease held for want of a spare gets it now, docs/health.md "Spare hosts"); may raise a DomainError
#: (the transaction rolls back).
_SPARE_READY_HOOKS: list[Callable[[Host], None]] = []


def register_spare_ready_hook(fn: Callable[[Host], None]) -> None:
    if fn not in _SPARE_READY_HOOKS:
        _SPARE_READY_HOOKS.append(fn)


def _spare_ready(host: Host) -> None:
    for hook in _SPARE_READY_HOOKS:
        hook(host)


def host_spare_set(*, actor, host: Host, spare: bool, reason: str) -> Host:
    """Put `host` in the provider's spare pool (`spare=True`) or take it out (docs/health.md, "Spare hosts").

    A spare is held out of every placement (on-demand, spot, queued, lease and capacity views); only a lease's
    host replacement (`apps.health.services.lease_spares`) claims one, which takes it out of the pool. Work already
    on the host stays. An `available` host put in the pool goes, in this transaction, to the oldest lease held for
    want of a spare that it fits (the spare-ready hooks): the host returned then is out of the pool again. Idempotent: the same value again changes nothing and records nothing. Audited
    (`inventory.host.spare`). Raises ValidationFailed 400 `reason_required`; Conflict 409 `host_retired` when
    putting a retired host in the pool."""
    reason = _reason(reason)
    with transaction.atomic():
        row = Host.objects.select_for_update().get(pk=host.pk)
        if row.spare == spare:
            return row
        if spare and row.state == HostState.RETIRED:
            raise Conflict("A retired host cannot be a spare.", code="host_retired")
        row.spare = spare
        row.save(update_fields=["spare", "updated_at"])
        audit_record(actor=actor, action="inventory.host.spare", target=row,
                     before={"spare": not spare}, after={"spare": spare, "reason": reason})
        if spare and row.state == HostState.AVAILABLE:
            _spare_ready(row)  # a lease held for want of a spare may take it now (it then leaves the pool)
            row.refresh_from_db()
    return row


def _require_scrubbed(host: Host) -> None:
    dirty = host_dirty_gpus(host)
    if dirty:
        raise GpuScrubPending(
            f"Host {host.name} has GPUs that held a tenant and are not scrubbed yet ("
            + ", ".join(f"gpu{d['index']}: {d['scrub_state']}" for d in dirty)
            + "); wait for the agent's scrub, or fix the GPU and retry a failed scrub (POST /gpus/{id}/scrub).",
            gpus=dirty)


def host_cordon(*, actor, host: Host, reason: str, at: dt.datetime | None = None) -> Host:
    """No new placements land on the host; running workloads stay."""
    return host_condition_set(actor=actor, host=host, action="cordon", reason=reason, at=at)


def host_drain(*, actor, host: Host, reason: str, at: dt.datetime | None = None) -> Host:
    """No new placements land on the host, as for cordon; nothing running is stopped or moved (VMs leave a host
    through health's remediations, opened by fault events, docs/health.md). The state says the host is on its way
    to repair or retirement."""
    return host_condition_set(actor=actor, host=host, action="drain", reason=reason, at=at)


def host_maintenance(*, actor, host: Host, reason: str, at: dt.datetime | None = None) -> Host:
    return host_condition_set(actor=actor, host=host, action="maintenance", reason=reason, at=at)


def host_mark_faulty(*, actor, host: Host, reason: str, provider_at_fault: bool = True,
                     at: dt.datetime | None = None) -> Host:
    return host_condition_set(actor=actor, host=host, action="mark_faulty", reason=reason,
                              provider_at_fault=provider_at_fault, at=at)


def host_mark_available(*, actor, host: Host, reason: str, at: dt.datetime | None = None) -> Host:
    """Back to `available`. Raises Conflict 409 `gpu_scrub_pending` (with `gpus`: index, scrub_state,
    scrub_reason) while any of the host's GPUs is `dirty` or `scrub_failed` (docs/compute.md, "Scrub")."""
    with transaction.atomic():  # the row lock first: a GPU's scrub state and the transition are read together
        Host.objects.select_for_update().filter(pk=host.pk).exists()
        _require_scrubbed(host)
        return host_condition_set(actor=actor, host=host, action="mark_available", reason=reason, at=at)


def host_retire(*, actor, host: Host, reason: str, at: dt.datetime | None = None) -> Host:
    """Take the host out of the fleet for good (terminal state; the fleet file no longer manages it)."""
    return host_condition_set(actor=actor, host=host, action="retire", reason=reason, at=at)


def _gpu_last_change(gpu: Gpu):
    last = Incident.objects.filter(gpu=gpu).order_by("-start").values_list("start", "end").first()
    return None if last is None else (last[1] or last[0])


def gpu_mark_faulty(*, actor, gpu: Gpu, reason: str, provider_at_fault: bool = True,
                    at: dt.datetime | None = None) -> Gpu:
    """Mark one GPU faulty and open a GPU incident at `at` (default now; idempotent while one is open, except that
    `provider_at_fault` True turns an open incident that was not the provider's into one that is)."""
    reason = _reason(reason)
    with transaction.atomic():
        gpu = Gpu.objects.select_for_update().get(pk=gpu.pk)
        at = _effective_at(at, not_before=_gpu_last_change(gpu))
        before = gpu.health
        gpu.health = GpuHealth.FAULTY
        gpu.save(update_fields=["health"])
        open_incident = Incident.objects.filter(gpu=gpu, end__isnull=True).first()
        if open_incident is None:
            Incident.objects.create(host_id=gpu.host_id, gpu=gpu, start=at, reason=reason,
                                    provider_at_fault=provider_at_fault)
        elif provider_at_fault and not open_incident.provider_at_fault:  # a later fault is the provider's
            Incident.objects.filter(pk=open_incident.pk).update(provider_at_fault=True, reason=reason,
                                                                updated_at=now())
        audit_record(actor=actor, action="inventory.gpu.mark_faulty", target=gpu, before={"health": before},
                     after={"health": gpu.health, "reason": reason})
    return gpu


def gpu_mark_healthy(*, actor, gpu: Gpu, reason: str, at: dt.datetime | None = None) -> Gpu:
    """Back to `ok`; closes the GPU's open incident at `at` (default now)."""
    reason = _reason(reason)
    with transaction.atomic():
        gpu = Gpu.objects.select_for_update().get(pk=gpu.pk)
        at = _effective_at(at, not_before=_gpu_last_change(gpu))
        before = gpu.health
        gpu.health = GpuHealth.OK
        gpu.save(update_fields=["health"])
        Incident.objects.filter(gpu=gpu, end__isnull=True).update(end=at, updated_at=at)
        audit_record(actor=actor, action="inventory.gpu.mark_healthy", target=gpu, before={"health": before},
                     after={"health": gpu.health, "reason": reason})
    return gpu


INCIDENT_FIELDS = ("start", "end", "reason", "provider_at_fault")
#: the fields whose change changes the downtime an incident stands for (billing reads them)
INCIDENT_DOWNTIME_FIELDS = ("start", "end", "provider_at_fault")

#: Called inside `incident_update`'s transaction after a change of `INCIDENT_DOWNTIME_FIELDS` is saved, with
#: (actor, incident as it was, incident as it is now): may raise a DomainError to refuse the change (the
#: transaction rolls back) or bring what it derives from the incident up to date. Registered by billing.
IncidentChangeHook = Callable[[object, Incident, Incident], None]
_INCIDENT_CHANGE_HOOKS: list[IncidentChangeHook] = []


def register_incident_change_hook(fn: IncidentChangeHook) -> None:
    if fn not in _INCIDENT_CHANGE_HOOKS:
        _INCIDENT_CHANGE_HOOKS.append(fn)


def incident_update(*, actor, incident: Incident, **changes) -> Incident:
    """Correct an incident: `start` (when the fault began), `end` (a closed incident's only: an open one ends when
    its host or GPU is marked available), `reason`, `provider_at_fault` (whether its downtime counts against the
    SLA of the resources that ran there). Only the keys given change; audited as `inventory.incident.update` with
    the fields before and after. A change of its window or fault is handed, in the same transaction, to the
    registered incident change hooks (billing: refuses it once an invoice derived from the incident is finalized,
    else re-rates the drafts it touches, docs/adr/0606-incident-corrections-after-billing.md).

    Raises ValidationFailed (400, on the field): `invalid_time` for a naive or future time, a start not before the
    end, or a start before the end of the same host's (or GPU's) previous incident (incidents never overlap);
    `reason_required` for an empty reason; Conflict (409 `incident_open`) for an `end` on an open incident; what a
    hook raises (billing: 409 `incident_already_credited`).
    """
    changes = {k: v for k, v in changes.items() if k in INCIDENT_FIELDS}
    with transaction.atomic():
        inc = Incident.objects.select_for_update().get(pk=incident.pk)
        before = {k: getattr(inc, k) for k in changes}
        if "reason" in changes:
            changes["reason"] = _reason(changes["reason"])
        if "end" in changes and inc.end is None:
            raise Conflict("An open incident ends when its host or GPU is marked available.", code="incident_open",
                           errors={"end": ["the incident is open"]})
        for key in ("start", "end"):
            if key in changes and changes[key] is None:
                raise ValidationFailed(f"`{key}` is required.", code="invalid_time", errors={key: ["required"]})
            if key in changes:
                _effective_at(changes[key], not_before=None, field=key)
        start, end = changes.get("start", inc.start), changes.get("end", inc.end)
        if end is not None and end <= start:
            field = "start" if "start" in changes else "end"
            raise ValidationFailed("An incident's start must be before its end.", code="invalid_time",
                                   errors={field: ["start not before end"]})
        previous = (Incident.objects.filter(host_id=inc.host_id, gpu_id=inc.gpu_id, start__lt=inc.start)
                    .exclude(pk=inc.pk).order_by("-start").values_list("end", flat=True).first())
        if previous is not None and start < previous:
            raise ValidationFailed(f"The start is before the end of the previous incident ({previous.isoformat()}).",
                                   code="invalid_time", errors={"start": ["before the previous incident's end"]})
        was = copy.copy(inc)
        for key, value in changes.items():
            setattr(inc, key, value)
        inc.save(update_fields=[*changes, "updated_at"])
        if any(getattr(was, k) != getattr(inc, k) for k in INCIDENT_DOWNTIME_FIELDS):
            for hook in _INCIDENT_CHANGE_HOOKS:
                hook(actor, was, inc)
        jsonable = lambda v: v.isoformat() if isinstance(v, dt.datetime) else v  # noqa: E731
        audit_record(actor=actor, action="inventory.incident.update", target=inc,
                     before={k: jsonable(v) for k, v in before.items()},
                     after={k: jsonable(getattr(inc, k)) for k in changes})
    return inc
