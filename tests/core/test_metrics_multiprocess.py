"""With several gunicorn worker processes and `PROMETHEUS_MULTIPROC_DIR` set (as the web unit and the compose web
service run), every scrape of /metrics reports the requests of all the workers, whichever worker answers it,
beside the business series of the scrape-time collectors."""
from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.stack import free_port, poll

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
REQUESTS = 40


def _get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers={"Connection": "close"})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _healthz_count(text: str) -> float:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "gpucloud_http_requests_total" and s.labels.get("route") == "/healthz":
                return s.value
    return 0.0


def test_every_scrape_counts_the_requests_of_every_worker_process(tmp_path):
    db = connection.settings_dict
    url = f"postgres://{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    if db.get("USER"):
        url = url.replace("postgres://", f"postgres://{db['USER']}@")
    prom = tmp_path / "prometheus"
    prom.mkdir()
    (prom / "counter_1.db").write_bytes(b"left by an earlier run")   # gunicorn empties the directory at start
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(settings.BASE_DIR),
           "LOG_FILE": str(tmp_path / "app.log"), "PROMETHEUS_MULTIPROC_DIR": str(prom)}
    port = free_port()
    log = open(tmp_path / "web.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "--config", "deploy/gunicorn.conf.py",
                             "gpucloud.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "3",
                             "--threads", "1", "--no-control-socket"], cwd=settings.BASE_DIR, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def healthy():
            assert proc.poll() is None, (tmp_path / "web.log").read_text()
            try:
                return _get(port, "/readyz")[0] == 200
            except OSError:
                return False
        poll(healthy, timeout=60, what="gunicorn /readyz")
        for _ in range(REQUESTS):
            assert _get(port, "/healthz")[0] == 200
        writers = {p.name.rsplit("_", 1)[1] for p in Path(prom).glob("counter_*.db")}
        assert len(writers) >= 2, f"one worker served everything ({writers}): the test proves nothing"
        for _ in range(6):   # each scrape may be answered by another worker: each sees all the requests
            status, body = _get(port, "/metrics")
            text = body.decode()
            assert status == 200 and _healthz_count(text) == REQUESTS
            assert "# TYPE gpucloud_gpus gauge" in text and "# TYPE gpucloud_operation_duration_seconds " in text
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
