BEAT_SCHEDULE = {
    "health-heartbeat-lost-detect": {
        "task": "health.heartbeat_lost_detect_task",
        "schedule": 60.0,
        "options": {"queue": "reconcile"},
    },
    "health-repairs-advance": {
        "task": "health.repairs_advance_task",
        "schedule": 15.0,
        "options": {"queue": "reconcile"},
    },
    "health-remediations-advance": {
        "task": "health.remediations_advance_task",
        "schedule": 15.0,
        "options": {"queue": "reconcile"},
    },
}
