"""A real Celery worker is SIGKILLed in the middle of step two; a new worker resumes at step two and never
runs the finished step one again. With each broker: Redis and RabbitMQ (`brokers`)."""
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from apps.operations.models import Operation

from . import killable  # noqa: F401  (registers the workflow in this process too)
from .brokers import BROKER_DB, empty_broker


def _worker_env(tmp_path: Path) -> dict:
    db = connection.settings_dict
    env = dict(os.environ)
    env.update(
        DATABASE_URL=f"postgres://{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}",
        CELERY_BROKER_URL=f"redis://127.0.0.1:6379/{BROKER_DB}",
        CELERY_RESULT_BACKEND=f"redis://127.0.0.1:6379/{BROKER_DB}",
        GPUCLOUD_TEST_STEP_LOG=str(tmp_path / "steps.log"),
        GPUCLOUD_TEST_GO_FILE=str(tmp_path / "go"),
        PYTHONPATH=str(settings.BASE_DIR),
    )
    if db.get("USER"):
        env["DATABASE_URL"] = env["DATABASE_URL"].replace("postgres://", f"postgres://{db['USER']}@")
    return env


def _start_worker(env: dict, tmp_path: Path, name: str, pool: str = "solo") -> subprocess.Popen:
    cmd = [sys.executable, "-m", "celery", "-A", "gpucloud", "worker", "--pool", pool, "-Q", "provisioning",
           "--include", "tests.operations.killable", "-n", f"{name}@%h", "--without-gossip",
           "--without-mingle", "--without-heartbeat", "--loglevel", "INFO"]
    log = open(tmp_path / f"{name}.log", "w")
    return subprocess.Popen(cmd, env=env, cwd=settings.BASE_DIR, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _lines(tmp_path: Path) -> list[str]:
    path = tmp_path / "steps.log"
    return path.read_text().split() if path.exists() else []


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_step_runner_resumes_after_worker_sigkill_without_rerunning_finished_step(tmp_path, broker):
    broker_url = empty_broker(broker)
    op = Operation.objects.create(kind="test.killable", target_type="test.thing", target_id=uuid.uuid4(),
                                  step="one")
    env = _worker_env(tmp_path)
    env["CELERY_BROKER_URL"] = broker_url
    first = _start_worker(env, tmp_path, "first")
    try:
        _wait(lambda: "two:start" in _lines(tmp_path), 60, "step two to start")
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
    op.refresh_from_db()
    assert (op.status, op.step, op.steps_done) == ("running", "two", ["one"])

    (tmp_path / "go").touch()
    second = _start_worker(env, tmp_path, "second")
    try:
        _wait(lambda: Operation.objects.get(id=op.id).status == "succeeded", 60, "operation to succeed")
    finally:
        os.killpg(second.pid, signal.SIGTERM)
        second.wait(15)
    op.refresh_from_db()
    shown = broker_url.replace("guest:guest@", "guest:**@")   # the worker's banner names its transport
    assert all(shown in (tmp_path / f"{n}.log").read_text() for n in ("first", "second"))
    assert op.steps_done == ["one", "two", "three"]
    lines = _lines(tmp_path)
    assert lines.count("one") == 1
    assert lines.count("two:start") == 2
    assert lines.count("two:done") == 1
    assert lines.count("three") == 1
    assert op.state == {"one": True, "two": True, "three": True}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_sigterm_lets_the_running_step_finish_then_the_next_worker_goes_on(tmp_path):
    """A warm shutdown (SIGTERM, what systemd and Docker send first) with the production pool (threads): the worker
    takes no new task, finishes the step it runs, commits it and exits; the next step waits in the broker for the
    next worker, and no step runs twice."""
    broker_url = empty_broker("redis")
    op = Operation.objects.create(kind="test.killable", target_type="test.thing", target_id=uuid.uuid4(),
                                  step="one")
    env = _worker_env(tmp_path)
    env["CELERY_BROKER_URL"] = broker_url
    first = _start_worker(env, tmp_path, "first", pool="threads")
    try:
        _wait(lambda: "two:start" in _lines(tmp_path), 60, "step two to start")
        os.killpg(first.pid, signal.SIGTERM)
        time.sleep(1.0)                       # step two is still waiting for its go-file when the signal comes
        assert first.poll() is None, "the worker left before its running step finished"
        (tmp_path / "go").touch()
        assert first.wait(30) == 0
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(10)
    assert _lines(tmp_path) == ["one", "two:start", "two:done"]
    op.refresh_from_db()
    assert (op.status, op.step, op.steps_done) == ("running", "three", ["one", "two"])

    second = _start_worker(env, tmp_path, "second", pool="threads")
    try:
        _wait(lambda: Operation.objects.get(id=op.id).status == "succeeded", 60, "operation to succeed")
    finally:
        os.killpg(second.pid, signal.SIGTERM)
        second.wait(15)
    assert _lines(tmp_path) == ["one", "two:start", "two:done", "three"]
