"""Periodic reconciles (drift repair): OVN every 60 s, every configured InfiniBand fabric every 30 s."""
BEAT_SCHEDULE = {
    "networking-ovn-reconcile": {
        "task": "networking.ovn_reconcile_task",
        "schedule": 60.0,
        "options": {"queue": "reconcile"},
    },
    "networking-ib-reconcile": {
        "task": "networking.ib_reconcile_all_task",
        "schedule": 30.0,
        "options": {"queue": "reconcile"},
    },
}
