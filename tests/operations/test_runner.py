"""The generic step runner: advance, retry transient errors with backoff, fail terminally, resume."""
import datetime as dt
import uuid

import pytest
import time_machine

from apps.core.clock import now
from apps.core.drivers import DriverError, DriverTransientError
from apps.operations import runner, workflows
from apps.operations.models import Operation

CALLS: list[str] = []
FAILS = {"transient": 0}


def _ok(name):
    def step(op):
        CALLS.append(name)
        op.state[name] = len(CALLS)
    return step


def _flaky(op):
    CALLS.append("flaky")
    if FAILS["transient"] > 0:
        FAILS["transient"] -= 1
        raise DriverTransientError("connection refused")


def _broken(op):
    CALLS.append("broken")
    op.state["should_not_persist"] = True
    raise DriverError("domain XML rejected", code="bad_domain_xml")


def _pieces(op):
    """Works through three pieces, one per run, each one committed with its place in the list."""
    done = op.state.get("done", 0)
    CALLS.append(f"piece{done}")
    Operation.objects.create(kind="test.piece", target_type="test.thing", target_id=uuid.uuid4(), step=str(done))
    op.state["done"] = done + 1
    return workflows.AGAIN if done + 1 < 3 else None


ERRORS: list[tuple] = []
workflows.register(workflows.Workflow(kind="test.ok", steps=(("a", _ok("a")), ("b", _ok("b")))))
workflows.register(workflows.Workflow(kind="test.flaky", steps=(("a", _ok("a")), ("flaky", _flaky)),
                                      deadline_seconds=60))
workflows.register(workflows.Workflow(kind="test.pieces", steps=(("pieces", _pieces), ("b", _ok("b")))))
workflows.register(workflows.Workflow(kind="test.broken", steps=(("a", _ok("a")), ("broken", _broken)),
                                      on_error=lambda op, code, detail: ERRORS.append((op.id, code))))


@pytest.fixture(autouse=True)
def _reset(monkeypatch):
    CALLS.clear()
    ERRORS.clear()
    sent: list = []
    monkeypatch.setattr(runner, "_enqueue", lambda op_id, wf, countdown=None: sent.append((op_id, countdown)))
    return sent


def _start(kind):
    return runner.operation_start(kind=kind, target_type="test.thing", target_id=uuid.uuid4())


@pytest.mark.django_db
def test_steps_run_in_order_and_each_once(_reset):
    op = _start("test.ok")
    assert runner.operation_run_step(op.id) == "a"
    assert runner.operation_run_step(op.id) == "b"
    assert runner.operation_run_step(op.id) is None  # finished: a repeated message does nothing
    op.refresh_from_db()
    assert (op.status, op.steps_done, CALLS) == ("succeeded", ["a", "b"], ["a", "b"])
    assert op.state == {"a": 1, "b": 2}
    assert op.finished_at is not None
    assert len(_reset) == 2  # initial enqueue + enqueue of step b


@pytest.mark.django_db
def test_a_step_returning_again_commits_each_piece_and_runs_again(_reset):
    op = _start("test.pieces")
    assert [runner.operation_run_step(op.id) for _ in range(4)] == ["pieces", "pieces", "pieces", "b"]
    op.refresh_from_db()
    assert (op.status, op.steps_done, CALLS) == ("succeeded", ["pieces", "b"], ["piece0", "piece1", "piece2", "b"])
    assert op.state["done"] == 3
    # each piece was committed once (no piece repeated), and each run enqueued the next
    assert sorted(Operation.objects.filter(kind="test.piece").values_list("step", flat=True)) == ["0", "1", "2"]
    assert len(_reset) == 4  # the start, two AGAINs and the advance to b


@pytest.mark.django_db
def test_transient_error_retries_with_growing_backoff_then_succeeds(_reset):
    FAILS["transient"] = 2
    op = _start("test.flaky")
    runner.operation_run_step(op.id)
    runner.operation_run_step(op.id)
    runner.operation_run_step(op.id)
    op.refresh_from_db()
    assert op.status == "running" and op.step == "flaky" and op.attempts == 2
    assert [c for _, c in _reset if c] == [0.5, 1.0]
    runner.operation_run_step(op.id)
    op.refresh_from_db()
    assert op.status == "succeeded" and op.attempts == 0


@pytest.mark.django_db
def test_transient_error_past_deadline_fails_with_code(_reset):
    FAILS["transient"] = 100
    op = _start("test.flaky")
    runner.operation_run_step(op.id)
    runner.operation_run_step(op.id)
    with time_machine.travel(now() + dt.timedelta(seconds=120)):
        runner.operation_run_step(op.id)
    op.refresh_from_db()
    assert (op.status, op.error_code) == ("failed", "deadline_exceeded")


@pytest.mark.django_db
def test_terminal_error_records_code_marks_target_and_keeps_no_partial_state(_reset):
    op = _start("test.broken")
    runner.operation_run_step(op.id)
    runner.operation_run_step(op.id)
    op.refresh_from_db()
    assert (op.status, op.error_code, op.step) == ("failed", "bad_domain_xml", "broken")
    assert "should_not_persist" not in op.state
    assert ERRORS == [(op.id, "bad_domain_xml")]
    assert runner.operation_run_step(op.id) is None


@pytest.mark.django_db
def test_resume_stalled_reenqueues_only_unfinished_old_operations(_reset):
    done = _start("test.ok")
    runner.operation_run_step(done.id)
    runner.operation_run_step(done.id)
    stalled = _start("test.ok")
    _reset.clear()
    with time_machine.travel(now() + dt.timedelta(seconds=60)):
        assert runner.operation_resume_stalled(older_than_seconds=30) == 1
    assert [op_id for op_id, _ in _reset] == [stalled.id]
    assert Operation.objects.get(id=stalled.id).status == "pending"
