"""Scheduling Celery work: `enqueue_on_commit()` is the only way to schedule a task.

A task is sent only after the surrounding transaction commits; if it rolls back, nothing is sent.
Outside a transaction (autocommit) it is sent at once.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction


def enqueue_on_commit(task, *args: Any, queue: str | None = None, countdown: float | None = None,
                      **kwargs: Any) -> None:
    """Send `task.apply_async(args, kwargs)` once the current transaction commits.

    `task` is a Celery task object; `queue` one of default | provisioning | reconcile | billing.
    """
    options: dict[str, Any] = {}
    if queue:
        options["queue"] = queue
    if countdown:
        options["countdown"] = countdown

    def _send() -> None:
        task.apply_async(args=args, kwargs=kwargs, **options)

    transaction.on_commit(_send, robust=False)
