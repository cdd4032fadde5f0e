BEAT_SCHEDULE = {
    "baremetal-nodes-reconcile": {
        "task": "baremetal.nodes_reconcile_task",
        "schedule": 60.0,
        "options": {"queue": "reconcile"},
    },
}
