BEAT_SCHEDULE = {
    "storage-attachments-reconcile": {
        "task": "storage.attachments_reconcile_task",
        "schedule": 60.0,
        "options": {"queue": "reconcile"},
    },
}
