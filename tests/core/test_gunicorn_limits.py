"""What a long URL or a long header gets through the real web server (gunicorn with deploy/gunicorn.conf.py, as
`make run`, the image and the e2e stack start it): every request line up to 8190 bytes and every header line up
to 16384 bytes reaches Django, which answers problem+json (a long unknown query parameter is the 400 naming it).
gunicorn's own default (4094) answered a 4 KiB URL with an HTML 414 page before Django saw it. A longer request
line is still gunicorn's HTML 414 (documented in docs/architecture.md, "Request size limits")."""
import http.client
import os
import signal
import subprocess
import sys

import pytest
from django.conf import settings
from django.db import connection

from tests.e2e.stack import free_port, poll
from tests.tenancy.helpers import make_org, make_user, member, token_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
PROBLEM = "application/problem+json"


@pytest.fixture
def web(tmp_path):
    db = connection.settings_dict
    url = f"postgres://{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    if db.get("USER"):
        url = url.replace("postgres://", f"postgres://{db['USER']}@")
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(settings.BASE_DIR),
           "LOG_FILE": str(tmp_path / "app.log")}
    port = free_port()
    log = open(tmp_path / "web.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "--config", "deploy/gunicorn.conf.py",
                             "gpucloud.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "1",
                             "--threads", "2", "--no-control-socket"], cwd=settings.BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)

    def healthy():
        assert proc.poll() is None, (tmp_path / "web.log").read_text()
        try:
            return _get(port, "/healthz")[0] == 200
        except OSError:
            return False
    try:
        poll(healthy, timeout=60, what="gunicorn /healthz")
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def _get(port: int, target: str, headers: dict | None = None) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", target, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()
    finally:
        conn.close()


def _bearer() -> dict:
    org = make_org("longurl")
    user = make_user("owner@longurl.test")
    member(user, org, "owner")
    return {"Authorization": f"Bearer {token_for(user, organization=org)}"}


def test_a_long_url_reaches_the_api_and_gets_problem_json(web):
    auth = _bearer()
    line = len("GET  HTTP/1.1")
    for length in (4200, 8190 - line):  # the first was gunicorn's HTML 414
        target = "/api/v1/projects/?bogus="
        target += "x" * (length - len(target))
        status, content_type, body = _get(web, target, auth)
        assert (status, content_type) == (400, PROBLEM), (length, status, body[:200])
        assert b'"bogus": ["Unknown parameter."]' in body or b'"bogus":["Unknown parameter."]' in body
    status, content_type, _ = _get(web, "/api/v1/projects/?bogus=" + "x" * 8200, auth)
    assert status == 414 and content_type.startswith("text/html")  # past the documented limit: gunicorn's page


def test_a_long_header_reaches_the_api(web):
    auth = _bearer()
    status, content_type, _ = _get(web, "/api/v1/projects/", {**auth, "X-Padding": "p" * 16000})
    assert (status, content_type) == (200, "application/json")  # gunicorn's default (8190) was its HTML 400
