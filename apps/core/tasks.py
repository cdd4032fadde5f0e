"""Scheduling Celery work: `enqueue_on_commit()` is the only way to schedule a task.

A task is sent only after the surrounding transaction commits; if it rolls back, nothing is sent.
Outside a transaction (autocommit) it is sent at once.

The broker being down is not the client's error: the transaction has committed, so a send that fails for an
unreachable or hanging broker (bounded by the broker timeouts in settings) is logged (`task_send_failed`) and
counted (`gpucloud_task_send_failures_total`), and the request goes on. Every task sent here has a periodic
safety net that sends the work again once the broker is back: unfinished operations are re-sent by the
operations resumer (at worker start and every 15 s, for operations idle 30 s); OVN and InfiniBand reconciles,
the on-demand queue and notification delivery run on beat anyway.
"""
from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.db import transaction
from kombu.exceptions import OperationalError as BrokerError

from .metrics import TASK_SEND_FAILURES

log = logging.getLogger("gpucloud.tasks")
#: What a send raises when the broker cannot be reached or does not answer in time.
BROKER_UNAVAILABLE = (BrokerError, ConnectionError, TimeoutError)


def enqueue_on_commit(task, *args: Any, queue: str | None = None, countdown: float | None = None,
                      **kwargs: Any) -> None:
    """Send `task.apply_async(args, kwargs)` once the current transaction commits.

    `task` is a Celery task object; `queue` one of default | provisioning | reconcile | billing | notifications.
    """
    options: dict[str, Any] = {}
    if queue:
        options["queue"] = queue
    if countdown:
        options["countdown"] = countdown

    def _send() -> None:
        try:
            task.apply_async(args=args, kwargs=kwargs, **options)
        except BROKER_UNAVAILABLE as exc:
            name = getattr(task, "name", type(task).__name__)
            TASK_SEND_FAILURES.labels(name).inc()
            log.warning("task_send_failed", extra={"task": name, "task_args": [str(a) for a in args],
                                                   "error": str(exc)[:500]})

    transaction.on_commit(_send, robust=False)


@shared_task(name="core.idempotency_keys_purge_task")
def idempotency_keys_purge_task() -> int:
    """Beat: delete expired `Idempotency-Key` answers (`apps.core.idempotency.idempotency_keys_purge`); returns
    how many. Idempotent: a run that finds nothing expired deletes nothing."""
    from .idempotency import idempotency_keys_purge

    return idempotency_keys_purge()
