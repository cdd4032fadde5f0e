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
    from .services.notify import notifications_deliver

    return notifications_deliver()
