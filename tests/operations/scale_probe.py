"""The Celery application of the multi-process test (`-A tests.operations.scale_probe`): gpucloud's own app, plus
counters written to two tables of the test database that the test creates (`STEP_TABLE`, `PERIODIC_TABLE`).

- Every workflow step that finishes (returns, not `AGAIN`) inserts one row (operation, step, worker pid) into
  `STEP_TABLE` **inside the step's transaction**: the row exists exactly when the step's work committed, so a
  step that ran twice to completion shows two rows, and a step a SIGKILL cut short shows none.
- A beat process records each periodic task it sends (task id, name, time); a worker records each periodic task
  it receives (its node name) and each one it starts running. The test compares the three.

Imported by the test's worker and beat processes only; `gpucloud.celery` stays untouched.
"""
from __future__ import annotations

import os
from functools import wraps

from celery.signals import beat_init, before_task_publish, task_prerun, task_received, worker_init

from gpucloud.celery import app  # noqa: F401  (the `-A` target)

STEP_TABLE = "scale_test_step_runs"
PERIODIC_TABLE = "scale_test_periodic"
SCHEMA = (
    f"CREATE TABLE {STEP_TABLE} (operation_id uuid NOT NULL, kind text NOT NULL, step text NOT NULL,"
    " pid integer NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())",
    f"CREATE TABLE {PERIODIC_TABLE} (event text NOT NULL, task_id text NOT NULL, task text NOT NULL,"
    " node text NOT NULL DEFAULT '', at timestamptz NOT NULL DEFAULT clock_timestamp())",
)
_BEAT = {"on": False}
#: set in the test's worker processes only (worker_init, inherited by the pool's children): this module is
#: imported by the pytest process too (for its table names), whose eager task runs must not record anything
_WORKER = {"on": False}
_WRAPPED: dict = {}


def _insert(sql: str, params: list) -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(sql, params)


def _counted(kind: str, step: str, fn):
    from apps.operations import workflows

    @wraps(fn)
    def run(op):
        result = fn(op)
        if result is not workflows.AGAIN:   # same transaction as the step: committed together or not at all
            _insert(f"INSERT INTO {STEP_TABLE} (operation_id, kind, step, pid) VALUES (%s, %s, %s, %s)",
                    [str(op.pk), kind, step, os.getpid()])
        return result
    return run


def _install_step_counters() -> None:
    """Make the runner's `workflows.get` hand out each workflow with counted steps (same names, order, hooks)."""
    import dataclasses

    from apps.operations import workflows

    original = workflows.get

    def get(kind: str):
        wf = original(kind)
        if kind not in _WRAPPED or _WRAPPED[kind][0] is not wf:
            steps = tuple((name, _counted(kind, name, fn)) for name, fn in wf.steps)
            _WRAPPED[kind] = (wf, dataclasses.replace(wf, steps=steps))
        return _WRAPPED[kind][1]

    workflows.get = get


@worker_init.connect
def _worker_started(**_kwargs):
    """In the worker's main process, before the pool forks: its children inherit the counted steps."""
    _WORKER["on"] = True
    _install_step_counters()


def _periodic_names() -> set[str]:
    return {entry["task"] for entry in app.conf.beat_schedule.values()}


@beat_init.connect
def _beat_started(**_kwargs):
    _BEAT["on"] = True


@before_task_publish.connect
def _beat_sent(sender=None, headers=None, **_kwargs):
    if _BEAT["on"] and headers and sender in _periodic_names():
        _insert(f"INSERT INTO {PERIODIC_TABLE} (event, task_id, task) VALUES ('sent', %s, %s)",
                [headers["id"], sender])


@task_received.connect
def _worker_received(request=None, **_kwargs):
    if _WORKER["on"] and request is not None and request.name in _periodic_names():
        _insert(f"INSERT INTO {PERIODIC_TABLE} (event, task_id, task, node) VALUES ('received', %s, %s, %s)",
                [request.id, request.name, request.hostname or ""])


@task_prerun.connect
def _worker_ran(sender=None, task_id=None, **_kwargs):
    if _WORKER["on"] and sender is not None and sender.name in _periodic_names():
        _insert(f"INSERT INTO {PERIODIC_TABLE} (event, task_id, task, node) VALUES ('ran', %s, %s, %s)",
                [task_id, sender.name, sender.request.hostname or ""])
