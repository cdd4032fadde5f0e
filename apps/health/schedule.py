BEAT_SCHEDULE = {
    "health-heartbeat-lost-detect": {
        "task": "health.heartbeat_lost_detect_task",
        # 15 s, the agents' cycle: a dead host leaves placement within 15 s of its silence crossing the threshold
        # (one indexed read of the silent hosts per run)
        "schedule": 15.0,
        "options": {"queue": "reconcile"},
    },
    "health-fences-advance": {
        "task": "health.fences_advance_task",
        # 15 s: a silent host's power-off is sent within 15 s of its event and read back on the next runs
        "schedule": 15.0,
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
    "health-lease-spares-sweep": {
        "task": "health.lease_spares_sweep_task",
        # a lease held for want of a spare gets one at once when staff add it (the spare-ready hook); the sweep
        # catches the rest (a spare's GPU healthy again, a hook's transaction lost)
        "schedule": 60.0,
        "options": {"queue": "reconcile"},
    },
}
