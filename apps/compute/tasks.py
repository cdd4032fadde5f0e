"""Thin Celery entry points of the compute app."""
from dataclasses import asdict

from celery import shared_task

from .services.instances import console_log_read
from .services.reconcile import instances_reconcile


@shared_task(name="compute.instances_reconcile_task")
def instances_reconcile_task() -> dict:
    """Compare instances with the domains on every hypervisor (beat, queue `reconcile`)."""
    return asdict(instances_reconcile())


@shared_task(name="compute.console_log_read_task")
def console_log_read_task(instance_id: str, max_bytes: int = 65536) -> dict:
    """Read an instance's serial console log in the worker that holds the host's libvirt connection, for
    `GET /instances/{id}/console-log` (queue `provisioning`): ``{"log": str}`` or ``{"error": code, "detail"}``.
    A read: running it twice is harmless."""
    return console_log_read(instance_id=instance_id, max_bytes=max_bytes)
