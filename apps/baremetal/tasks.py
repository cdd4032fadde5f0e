"""Thin Celery entry points of the bare-metal app."""
from dataclasses import asdict

from celery import shared_task

from .services.reconcile import nodes_reconcile


@shared_task(name="baremetal.nodes_reconcile_task")
def nodes_reconcile_task() -> dict:
    """Read every node back from Ironic and mirror it (beat, queue `reconcile`); a read-only pass on Ironic."""
    return asdict(nodes_reconcile())
