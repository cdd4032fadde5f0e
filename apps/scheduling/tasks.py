"""Celery entry points of scheduling (thin: each calls one ledger function)."""
from celery import shared_task


@shared_task(name="scheduling.ledger_usage_refresh_task", acks_late=True)
def ledger_usage_refresh_task() -> int:
    from .ledger.maintenance import ledger_usage_refresh_all

    return ledger_usage_refresh_all()


@shared_task(name="scheduling.ledger_audit_task", acks_late=True)
def ledger_audit_task(remove: bool = False) -> dict:
    from .ledger.maintenance import ledger_audit

    return ledger_audit(remove=remove)
