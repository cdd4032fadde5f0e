BEAT_SCHEDULE = {
    "storage-attachments-reconcile": {
        "task": "storage.attachments_reconcile_task",
        "schedule": 300.0,  # a safety net: the instance delete workflow releases attachments itself
        "options": {"queue": "reconcile"},
    },
}
