"""Celery beat: lease starts/notices/ends and spot preemptions every 15 s, queue processing every 15 s,
notification delivery (with backoff) every 30 s."""
BEAT_SCHEDULE = {
    "reservations-leases-advance": {"task": "reservations.leases_advance_task", "schedule": 15.0,
                                    "options": {"queue": "reconcile"}},
    "reservations-queue-process": {"task": "reservations.queue_process_task", "schedule": 15.0,
                                   "options": {"queue": "provisioning"}},
    "reservations-notifications-deliver": {"task": "reservations.notifications_deliver_task", "schedule": 30.0,
                                           "options": {"queue": "notifications"}},
}
