"""Celery entry points: reconcile the desired state in the database into OVN and the InfiniBand SMs.

Both tasks are idempotent (a second run changes nothing) and safe to run concurrently with API writes: they
read a consistent snapshot and the adapters compare before they write. Unconfigured backends are skipped.
"""
from celery import shared_task


@shared_task(name="networking.ovn_reconcile_task", acks_late=True)
def ovn_reconcile_task() -> dict:
    from .services.reconcile import ovn_reconcile

    return ovn_reconcile()


@shared_task(name="networking.ib_fabric_reconcile_task", acks_late=True)
def ib_fabric_reconcile_task(fabric_id: str) -> dict:
    from .services.reconcile import ib_fabric_reconcile

    return ib_fabric_reconcile(fabric_id=fabric_id)


@shared_task(name="networking.ib_reconcile_all_task", acks_late=True)
def ib_reconcile_all_task() -> dict:
    from .services.reconcile import ib_reconcile_all

    return ib_reconcile_all()
