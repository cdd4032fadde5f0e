"""Two real beat processes (one started by mistake) send each periodic task once per period; when the one that
holds the lock is SIGKILLed, the other takes over (gpucloud/beat.py, ADR 1100)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection

TASK = "core.idempotency_keys_purge_task"  # scheduled every IDEMPOTENCY_KEY_PURGE_INTERVAL_SECONDS (1 s here)


def _env(period: int = 1) -> dict:
    db = connection.settings_dict
    user = f"{db['USER']}@" if db.get("USER") else ""
    env = dict(
        os.environ,
        PYTHONPATH=str(settings.BASE_DIR),
        IDEMPOTENCY_KEY_PURGE_INTERVAL_SECONDS=str(period),
        BEAT_STANDBY_RETRY_SECONDS="1",
        DATABASE_URL=f"postgres://{user}{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}",
    )
    return env


def _beat(tmp_path: Path, name: str, period: int = 1) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "gpucloud",
        "beat",
        "--schedule",
        str(tmp_path / f"{name}.db"),
        "--loglevel",
        "INFO",
    ]
    log = open(tmp_path / f"{name}.log", "w")
    return subprocess.Popen(
        cmd, env=_env(period), cwd=settings.BASE_DIR, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def _stop(beats: list[subprocess.Popen], r: redis.Redis) -> None:
    for b in beats:
        if b.poll() is None:
            os.killpg(b.pid, signal.SIGTERM)
            b.wait(15)
    r.delete("default")


def _sent(r: redis.Redis) -> int:
    return sum(json.loads(m)["headers"]["task"] == TASK for m in r.lrange("default", 0, -1))


def _wait_for_more(r: redis.Redis, than: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _sent(r) <= than:
        assert time.monotonic() < deadline, "no periodic task was sent"
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_beats_send_each_periodic_task_once_per_period(tmp_path):
    r = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    r.delete("default")
    beats = [_beat(tmp_path, "a"), _beat(tmp_path, "b")]
    try:
        _wait_for_more(r, 0, 60)
        time.sleep(3)  # both beats are up and ticking by now
        start, t0 = _sent(r), time.monotonic()
        time.sleep(10)
        sent, elapsed = _sent(r) - start, time.monotonic() - t0
        assert elapsed - 2 <= sent <= elapsed + 2, (
            sent,
            elapsed,
        )  # two leaders would send about twice as many

        leader = next(
            b
            for b, n in zip(beats, "ab", strict=True)
            if "beat_lock_acquired" in (tmp_path / f"{n}.log").read_text()
        )
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait(10)
        before = _sent(r)
        _wait_for_more(r, before, 30)  # the standby takes over
        time.sleep(3)
        assert _sent(r) - before <= 3 + 3  # at most the takeover's catch-up send plus one per second
    finally:
        _stop(beats, r)


def _send_times(r: redis.Redis, seen: list[float], until: float, stop_after: int) -> None:
    """Poll the queue every 0.1 s until `until` (monotonic) and append the time each new send of TASK was seen;
    return early once `stop_after` sends have been seen in all."""
    count = _sent(r)
    while time.monotonic() < until and len(seen) < stop_after:
        n = _sent(r)
        seen.extend([time.monotonic()] * (n - count))
        count = n
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_standby_taking_over_keeps_the_period_of_a_task_the_dead_leader_just_sent(tmp_path):
    """The leader is SIGKILLed a moment after it sent the task; the standby takes the lock within a second but sends
    the task only when the period since the leader's send is up (it used to send it at once, from its own never-run
    schedule)."""
    period = 8
    r = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    r.delete("default")
    beats = [_beat(tmp_path, "a", period), _beat(tmp_path, "b", period)]
    try:
        seen: list[float] = []
        _send_times(r, seen, time.monotonic() + 60, stop_after=1)
        assert seen, "the leader never sent the task"
        leader = next(b for b, n in zip(beats, "ab", strict=True)
                      if "beat_lock_acquired" in (tmp_path / f"{n}.log").read_text())
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait(10)
        killed_at = time.monotonic()
        _send_times(r, seen, killed_at + 3 * period, stop_after=2)
        assert len(seen) == 2, "the standby never took over"
        standby = "b" if leader is beats[0] else "a"
        assert "beat_lock_acquired" in (tmp_path / f"{standby}.log").read_text()
        assert seen[1] - seen[0] >= period - 1.5, (seen[1] - seen[0], killed_at - seen[0])
    finally:
        _stop(beats, r)
