"""Thin Celery entry points of the storage app."""
from dataclasses import asdict

from celery import shared_task

from .services.reconcile import attachments_reconcile


@shared_task(name="storage.attachments_reconcile_task")
def attachments_reconcile_task() -> dict:
    """Release the attachments of deleted instances that their delete workflow missed (beat, queue `reconcile`)."""
    return asdict(attachments_reconcile())
