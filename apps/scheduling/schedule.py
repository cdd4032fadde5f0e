"""Periodic ledger housekeeping: rebuild the per-host usage summary every 5 minutes (picks up GPU health and
mode changes and new hosts), report orphaned allocations hourly (report only; release is an operator action)."""
BEAT_SCHEDULE = {
    "scheduling-usage-refresh": {
        "task": "scheduling.ledger_usage_refresh_task",
        "schedule": 300.0,
        "options": {"queue": "reconcile"},
    },
    "scheduling-ledger-audit": {
        "task": "scheduling.ledger_audit_task",
        "schedule": 3600.0,
        "options": {"queue": "reconcile"},
    },
}
