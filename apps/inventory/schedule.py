"""Celery beat: the batched agent last-seen times are written every `AGENT_LAST_SEEN_FLUSH_SECONDS` (60 s by
default; services/last_seen.py); the MIG drift between the ledger and the agents' reports is recorded every
5 minutes (services/mig_drift.py)."""

from django.conf import settings

BEAT_SCHEDULE = {
    "inventory-agent-last-seen-flush": {
        "task": "inventory.agent_last_seen_flush_task",
        "schedule": float(settings.AGENT_LAST_SEEN_FLUSH_SECONDS),
        "options": {"queue": "default"},
    },
    "inventory-mig-drift-reconcile": {
        "task": "inventory.mig_drift_reconcile_task",
        "schedule": 300.0,
        "options": {"queue": "default"},
    },
}
