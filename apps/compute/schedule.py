BEAT_SCHEDULE = {
    "compute-instances-reconcile": {
        "task": "compute.instances_reconcile_task",
        "schedule": 30.0,
        "options": {"queue": "reconcile"},
    },
}
