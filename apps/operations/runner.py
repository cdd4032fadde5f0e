"""The generic step runner.

For one Operation: lock the row (`SELECT ... FOR UPDATE SKIP LOCKED`), run the current step idempotently,
advance `step` with a compare-and-set, commit, and enqueue the next step after commit. A worker killed mid-step
loses only that step's uncommitted transaction; `operation_resume_stalled` (beat, and at worker start) re-sends
every unfinished operation, which resumes at the last committed step and never re-runs a finished one.
"""
from __future__ import annotations

import datetime as dt
import json
import logging

from django.core.serializers.json import DjangoJSONEncoder
from django.db import (
    DatabaseError,
    DataError,
    IntegrityError,
    NotSupportedError,
    ProgrammingError,
    transaction,
)

from apps.core.clock import now
from apps.core.db import is_contention
from apps.core.drivers import DriverError, DriverTransientError
from apps.core.errors import DomainError
from apps.core.tasks import enqueue_on_commit

from . import workflows
from .models import TERMINAL, Operation, OperationStatus

log = logging.getLogger("gpucloud.operations")

#: database errors a step meets again on every run (the data, not the database, is at fault)
NON_TRANSIENT_DB_ERRORS = (DataError, IntegrityError, NotSupportedError, ProgrammingError)


def operation_start(*, kind: str, target_type: str, target_id, project=None, actor=None, state=None,
                    request_id: str = "") -> Operation:
    """Create an Operation at its first step and enqueue it after commit. Call inside the service's transaction."""
    wf = workflows.get(kind)
    op = Operation.objects.create(
        kind=kind, target_type=target_type, target_id=target_id, project=project, actor=actor,
        state=state or {}, step=wf.names[0], status=OperationStatus.PENDING,
        deadline_at=now() + dt.timedelta(seconds=wf.deadline_seconds),
        request_id=request_id,
    )
    _enqueue(op.id, wf)
    return op


def operations_cancel_unfinished(*, target_type: str, target_id, code: str) -> int:
    """Cancel every unfinished operation of one target (status `cancelled`, `error_code` = `code`, finished
    now); returns how many. The UPDATE takes their row locks, so it waits for a step that is running (the
    runner's lock order: operation rows first, then the target). Call inside the caller's transaction."""
    at = now()
    return (Operation.objects.filter(target_type=target_type, target_id=target_id).exclude(status__in=TERMINAL)
            .update(status=OperationStatus.CANCELLED, error_code=code, finished_at=at, updated_at=at))


def operation_deadline_set(*, operation: Operation, deadline_at: dt.datetime) -> None:
    """Move `operation`'s deadline (e.g. a create that waits in a queue until the queue's own timeout)."""
    Operation.objects.filter(pk=operation.pk).update(deadline_at=deadline_at, updated_at=now())
    operation.deadline_at = deadline_at


def _enqueue(op_id, wf: workflows.Workflow, countdown: float | None = None) -> None:
    from .tasks import operation_run_step_task

    enqueue_on_commit(operation_run_step_task, str(op_id), queue=wf.queue, countdown=countdown)


def _backoff(wf: workflows.Workflow, attempts: int) -> float:
    return min(wf.max_backoff_seconds, 0.5 * (2 ** max(0, attempts - 1)))


def operation_run_step(operation_id) -> str | None:
    """Run the operation's current step once. Returns the step that ran (None when nothing was due).

    Safe to call any number of times, concurrently: a locked or finished operation is skipped.
    """
    failure: tuple[str, str, dict] | None = None
    with transaction.atomic():
        op = Operation.objects.select_for_update(skip_locked=True).filter(id=operation_id).first()
        if op is None or op.status in TERMINAL:
            return None
        wf = workflows.get(op.kind)
        step = op.step
        if op.deadline_at and now() > op.deadline_at:
            failure = ("deadline_exceeded", f"step {step!r} did not finish before the deadline", {})
        else:
            try:
                with transaction.atomic():
                    result = wf.fn(step)(op)
            except workflows.StepWait as wait:
                Operation.objects.filter(id=op.id).update(status=OperationStatus.RUNNING, updated_at=now(),
                                                          state=op.state)
                _enqueue(op.id, wf, countdown=wait.seconds)
                return step
            except (DriverTransientError, DatabaseError) as exc:
                if isinstance(exc, DatabaseError) and not is_contention(exc):
                    if not isinstance(exc, NON_TRANSIENT_DB_ERRORS):
                        raise  # a lost connection and the like: the task fails and a resume runs the step again
                    # bad data (an overflowing value, a violated constraint) rolled the step back to its
                    # savepoint; running it again gives the same error, so the operation fails with a code
                    failure = ("database_error", f"step {step!r}: {type(exc).__name__}: {exc}"[:2000], {})
                else:
                    # a deadlock or serialization failure rolled the step back to its savepoint: run it later
                    attempts = op.attempts + 1
                    delay = _backoff(wf, attempts)
                    Operation.objects.filter(id=op.id).update(
                        status=OperationStatus.RUNNING, attempts=attempts, updated_at=now(),
                        next_attempt_at=now() + dt.timedelta(seconds=delay), error_detail=str(exc)[:2000])
                    log.warning("operation_step_transient", extra={"operation_id": str(op.id), "step": step,
                                                                    "attempts": attempts, "error": str(exc)})
                    _enqueue(op.id, wf, countdown=delay)
                    return step
            except (DriverError, DomainError) as exc:
                failure = (getattr(exc, "code", "driver_error"), str(exc), _jsonable(getattr(exc, "extra", None)))
            else:
                if result is workflows.AGAIN:  # the piece commits with the state; the same step runs next
                    Operation.objects.filter(id=op.id).update(status=OperationStatus.RUNNING, updated_at=now(),
                                                              state=op.state, attempts=0, error_detail="")
                    _enqueue(op.id, wf)
                else:
                    _advance(op, wf, step)
                return step
    if failure:
        _fail(operation_id, *failure)
    return None


def _advance(op: Operation, wf: workflows.Workflow, step: str) -> None:
    nxt = wf.next_step(step)
    values = {"steps_done": [*op.steps_done, step], "state": op.state, "attempts": 0, "updated_at": now(),
              "error_detail": ""}
    if nxt is None:
        values.update(status=OperationStatus.SUCCEEDED, step="", finished_at=now())
    else:
        values.update(status=OperationStatus.RUNNING, step=nxt)
    # Compare-and-set on the step we ran: a concurrent runner (impossible under the row lock) could not advance twice.
    updated = Operation.objects.filter(id=op.id, step=step).exclude(status__in=TERMINAL).update(**values)
    if updated != 1:
        raise RuntimeError(f"operation {op.id} moved under its row lock")
    for key, value in values.items():
        setattr(op, key, value)
    if nxt is None:
        if wf.on_success:
            wf.on_success(op)
    else:
        _enqueue(op.id, wf)


def _jsonable(extra: dict | None) -> dict:
    return json.loads(json.dumps(extra or {}, cls=DjangoJSONEncoder))


def _fail(operation_id, code: str, detail: str, extra: dict | None = None) -> None:
    with transaction.atomic():
        op = Operation.objects.select_for_update().get(id=operation_id)
        if op.status in TERMINAL:
            return
        wf = workflows.get(op.kind)
        op.status = OperationStatus.FAILED
        op.error_code = code
        op.error_detail = detail[:2000]
        op.error_extra = extra or {}
        op.finished_at = now()
        op.save(update_fields=["status", "error_code", "error_detail", "error_extra", "finished_at"])
        log.error("operation_failed", extra={"operation_id": str(op.id), "code": code, "step": op.step})
        if wf.on_error:
            wf.on_error(op, code, detail)


def operation_resume_stalled(*, older_than_seconds: float = 30.0) -> int:
    """Re-enqueue unfinished operations not touched for `older_than_seconds` (0 = all). Returns the count."""
    cutoff = now() - dt.timedelta(seconds=older_than_seconds)
    ops = Operation.objects.exclude(status__in=TERMINAL).filter(updated_at__lte=cutoff).values_list("id", "kind")
    count = 0
    with transaction.atomic():
        for op_id, kind in ops:
            try:
                wf = workflows.get(kind)
            except KeyError:
                continue
            _enqueue(op_id, wf)
            count += 1
    return count
