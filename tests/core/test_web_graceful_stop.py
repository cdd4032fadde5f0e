"""SIGTERM to the web server (gunicorn with deploy/gunicorn.conf.py, threads as in production) finishes the
requests in flight: a request held inside Django (its query waits on a table lock the test holds) still gets its
200 after the signal, and the server exits cleanly once the request is done (not before).
The signal goes to the whole process group, as systemd's default `KillMode=control-group` sends it."""
from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import threading
import time

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from tests.e2e.stack import free_port, poll

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _conninfo() -> dict:
    db = connection.settings_dict
    info = {"dbname": db["NAME"], "host": db.get("HOST") or "127.0.0.1", "port": db.get("PORT") or 5432}
    if db.get("USER"):
        info["user"] = db["USER"]
    return info


def _url() -> str:
    info = _conninfo()
    user = f"{info['user']}@" if "user" in info else ""
    return f"postgres://{user}{info['host']}:{info['port']}/{info['dbname']}"


def _get(port: int, path: str, out: dict) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        out["status"], out["body"] = resp.status, resp.read()
    except OSError as exc:
        out["error"] = repr(exc)
    finally:
        conn.close()


def test_sigterm_finishes_the_request_in_flight(tmp_path):
    env = {**os.environ, "DATABASE_URL": _url(), "PYTHONPATH": str(settings.BASE_DIR),
           "LOG_FILE": str(tmp_path / "app.log")}
    port = free_port()
    log = open(tmp_path / "web.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "--config", "deploy/gunicorn.conf.py",
                             "gpucloud.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "1",
                             "--threads", "2", "--no-control-socket"], cwd=settings.BASE_DIR, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    locker = psycopg.connect(**_conninfo())
    try:
        def healthy():
            assert proc.poll() is None, (tmp_path / "web.log").read_text()
            out: dict = {}
            _get(port, "/healthz", out)
            return out.get("status") == 200
        poll(healthy, timeout=60, what="gunicorn /healthz")

        # /readyz reads the applied migrations: hold that table so the request waits inside Django
        locker.execute("LOCK TABLE django_migrations IN ACCESS EXCLUSIVE MODE")
        answer: dict = {}
        client = threading.Thread(target=_get, args=(port, "/readyz", answer))
        client.start()
        with psycopg.connect(**_conninfo(), autocommit=True) as watcher:
            poll(lambda: watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE "
                "'%django_migrations%'").fetchone()[0] == 1, timeout=30, what="the request to wait on the lock")

        os.killpg(proc.pid, signal.SIGTERM)
        time.sleep(1.5)
        assert proc.poll() is None, "gunicorn left with a request in flight"
        assert answer == {}            # still waiting

        locker.rollback()              # the request goes on
        client.join(30)
        assert answer.get("status") == 200, answer
        assert proc.wait(30) == 0
    finally:
        locker.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()
