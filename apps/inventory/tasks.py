"""Celery tasks of the inventory app."""

from celery import shared_task

from .services.last_seen import agent_last_seen_flush
from .services.mig_drift import mig_drift_reconcile


@shared_task(name="inventory.agent_last_seen_flush_task")
def agent_last_seen_flush_task() -> int:
    return agent_last_seen_flush()


@shared_task(name="inventory.mig_drift_reconcile_task")
def mig_drift_reconcile_task() -> dict:
    return mig_drift_reconcile()
