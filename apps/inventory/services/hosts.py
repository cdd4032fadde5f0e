"""Host conditions (cordon, drain, maintenance, faulty, available) and GPU faults, with incidents.

Each action: compare-and-set state change (`states.HOST_TRANSITIONS`), reason and time recorded on the host,
an audit event, and incident bookkeeping in the same transaction. Entering `faulty` opens an Incident
(`provider_at_fault` defaults to True); leaving `faulty` closes it at the same instant. Billing reads closed and
open incidents as SLA downtime (DOMAIN.md, Health/Billing).
"""
from __future__ import annotations

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.errors import ValidationFailed
from apps.core.transitions import transition

from ..models import Gpu, Host, Incident
from ..states import HOST_TRANSITIONS, GpuHealth, HostState

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


def host_condition_set(*, actor, host: Host, action: str, reason: str, provider_at_fault: bool = True) -> Host:
    """Apply `action` (a key of HOST_TRANSITIONS) with `reason`. Raises InvalidState (409) from a wrong state."""
    reason = _reason(reason)
    at = now()
    with transaction.atomic():
        before = transition(host, action, HOST_TRANSITIONS, field="state",
                            extra={"state_reason": reason, "state_changed_at": at})
        if before == HostState.FAULTY and host.state != HostState.FAULTY:
            Incident.objects.filter(host=host, gpu__isnull=True, end__isnull=True).update(end=at, updated_at=at)
        if host.state == HostState.FAULTY:
            Incident.objects.create(host=host, start=at, reason=reason, provider_at_fault=provider_at_fault)
        audit_record(actor=actor, action=AUDIT_ACTIONS[action], target=host,
                     before={"state": before}, after={"state": host.state, "reason": reason})
    return host


def host_cordon(*, actor, host: Host, reason: str) -> Host:
    """No new placements land on the host; running workloads stay."""
    return host_condition_set(actor=actor, host=host, action="cordon", reason=reason)


def host_drain(*, actor, host: Host, reason: str) -> Host:
    """Cordon, then workloads are moved or stopped by the owning apps (they watch `state == draining`)."""
    return host_condition_set(actor=actor, host=host, action="drain", reason=reason)


def host_maintenance(*, actor, host: Host, reason: str) -> Host:
    return host_condition_set(actor=actor, host=host, action="maintenance", reason=reason)


def host_mark_faulty(*, actor, host: Host, reason: str, provider_at_fault: bool = True) -> Host:
    return host_condition_set(actor=actor, host=host, action="mark_faulty", reason=reason,
                              provider_at_fault=provider_at_fault)


def host_mark_available(*, actor, host: Host, reason: str) -> Host:
    return host_condition_set(actor=actor, host=host, action="mark_available", reason=reason)


def host_retire(*, actor, host: Host, reason: str) -> Host:
    """Take the host out of the fleet for good (terminal state; the fleet file no longer manages it)."""
    return host_condition_set(actor=actor, host=host, action="retire", reason=reason)


def gpu_mark_faulty(*, actor, gpu: Gpu, reason: str, provider_at_fault: bool = True) -> Gpu:
    """Mark one GPU faulty and open a GPU incident (idempotent while one is open)."""
    reason = _reason(reason)
    at = now()
    with transaction.atomic():
        gpu = Gpu.objects.select_for_update().get(pk=gpu.pk)
        before = gpu.health
        gpu.health = GpuHealth.FAULTY
        gpu.save(update_fields=["health"])
        if not Incident.objects.filter(gpu=gpu, end__isnull=True).exists():
            Incident.objects.create(host_id=gpu.host_id, gpu=gpu, start=at, reason=reason,
                                    provider_at_fault=provider_at_fault)
        audit_record(actor=actor, action="inventory.gpu.mark_faulty", target=gpu, before={"health": before},
                     after={"health": gpu.health, "reason": reason})
    return gpu


def gpu_mark_healthy(*, actor, gpu: Gpu, reason: str) -> Gpu:
    """Back to `ok`; closes the GPU's open incident."""
    reason = _reason(reason)
    at = now()
    with transaction.atomic():
        gpu = Gpu.objects.select_for_update().get(pk=gpu.pk)
        before = gpu.health
        gpu.health = GpuHealth.OK
        gpu.save(update_fields=["health"])
        Incident.objects.filter(gpu=gpu, end__isnull=True).update(end=at, updated_at=at)
        audit_record(actor=actor, action="inventory.gpu.mark_healthy", target=gpu, before={"health": before},
                     after={"health": gpu.health, "reason": reason})
    return gpu
