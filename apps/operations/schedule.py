BEAT_SCHEDULE = {
    "operations-resume-stalled": {
        "task": "operations.operation_resume_stalled_task",
        "schedule": 15.0,
        "kwargs": {"older_than_seconds": 30.0},
        "options": {"queue": "reconcile"},
    },
}
