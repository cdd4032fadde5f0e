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


def _env() -> dict:
    db = connection.settings_dict
    user = f"{db['USER']}@" if db.get("USER") else ""
    env = dict(
        os.environ,
        PYTHONPATH=str(settings.BASE_DIR),
        IDEMPOTENCY_KEY_PURGE_INTERVAL_SECONDS="1",
        BEAT_STANDBY_RETRY_SECONDS="1",
        DATABASE_URL=f"postgres://{user}{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}",
    )
    return env


def _beat(tmp_path: Path, name: str) -> subprocess.Popen:
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
        cmd, env=_env(), cwd=settings.BASE_DIR, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def _sent(r: redis.Redis) -> int:
    return sum(json.loads(m)["headers"]["task"] == TASK for m in r.lrange("default", 0, -1))


def _wait_for_more(r: redis.Redis, than: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _sent(r) <= than:
        assert time.monotonic() < deadline, "no periodic task was sent"
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.django_db
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
        for b in beats:
            if b.poll() is None:
                os.killpg(b.pid, signal.SIGTERM)
                b.wait(15)
        r.delete("default")
