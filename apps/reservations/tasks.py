"""Celery entry points (thin): lifecycle ticks, queue processing, notification delivery."""
from celery import shared_task


@shared_task(name="reservations.leases_advance_task")
def leases_advance_task() -> dict:
    from .services.leases import leases_advance

    return leases_advance()


@shared_task(name="reservations.queue_process_task")
def queue_process_task() -> dict:
    from .services.queue import queue_process

    return queue_process()


@shared_task(name="reservations.notifications_deliver_task")
def notifications_deliver_task() -> int:
    """Beat sweep (queue `notifications`): enqueue one `notification_deliver_task` per due outbox row."""
    from .services.notify import notifications_dispatch

    return notifications_dispatch()


@shared_task(name="reservations.notification_deliver_task")
def notification_deliver_task(notification_id: str) -> str:
    """Send one outbox row (queue `notifications`); a failure schedules its own retry with a countdown."""
    from .services.notify import notification_deliver

    return notification_deliver(notification_id)
