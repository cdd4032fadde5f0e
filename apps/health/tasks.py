"""Thin Celery entry points of the health app."""

from celery import shared_task


@shared_task(name="health.heartbeat_lost_detect_task")
def heartbeat_lost_detect_task() -> int:
    """Record `heartbeat_lost` for silent agents (beat, queue `reconcile`; idempotent). Returns the count."""
    from .services.heartbeat import heartbeat_lost_detect

    return len(heartbeat_lost_detect())


@shared_task(name="health.remediations_advance_task")
def remediations_advance_task() -> dict:
    """Start due remediations and record finished ones (beat, queue `reconcile`; idempotent)."""
    from .services.remediation import remediations_advance

    return remediations_advance()


@shared_task(name="health.repairs_advance_task")
def repairs_advance_task() -> dict:
    """Open acceptances and move repairs one step (beat, queue `reconcile`; idempotent)."""
    from .services.repair import repairs_advance

    return repairs_advance()


@shared_task(name="health.lease_spares_sweep_task")
def lease_spares_sweep_task() -> int:
    """Give free spare hosts to leases held for want of one, oldest first (beat, queue `reconcile`; idempotent).
    Returns how many leases moved."""
    from .services.lease_spares import lease_spares_backfill

    return len(lease_spares_backfill())


@shared_task(name="health.fences_advance_task")
def fences_advance_task() -> dict:
    """Send silent hosts' BMCs the power-off and read it back (beat, queue `reconcile`; idempotent)."""
    from .services.fencing import fences_advance

    return fences_advance()
