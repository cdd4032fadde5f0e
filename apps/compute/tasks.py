"""Thin Celery entry points of the compute app."""
from dataclasses import asdict

from celery import shared_task

from .services.reconcile import instances_reconcile


@shared_task(name="compute.instances_reconcile_task")
def instances_reconcile_task() -> dict:
    """Compare instances with the domains on every hypervisor (beat, queue `reconcile`)."""
    return asdict(instances_reconcile())
