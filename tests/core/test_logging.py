"""The application log goes where `LOG_FILE` says (make run: var/log/app.log for the web server), one JSON object a
line, and an error logged during a request carries that request's `request_id`, the one its problem body quotes:
Django's own `django.request` line too, which is written after the request's context is cleared."""
import copy
import json
import logging.config

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from apps.core.logging import log_handlers

pytestmark = [pytest.mark.urls("tests.core.urls"), pytest.mark.django_db]


@pytest.fixture
def log_file(tmp_path):
    path = tmp_path / "app.log"
    logging.config.dictConfig({**copy.deepcopy(settings.LOGGING), "handlers": log_handlers(str(path))})
    yield path
    logging.config.dictConfig(copy.deepcopy(settings.LOGGING))


def test_a_500_is_logged_to_the_file_with_its_request_id(log_file):
    response = APIClient(raise_request_exception=False).get("/test/boom", HTTP_X_REQUEST_ID="req-file-500")
    assert response.status_code == 500 and response.json()["request_id"] == "req-file-500"
    for handler in logging.getLogger().handlers:
        handler.flush()
    lines = [json.loads(line) for line in log_file.read_text().splitlines()]
    unhandled = [line for line in lines if line["event"] == "unhandled_exception"]
    assert len(unhandled) == 1
    assert unhandled[0]["request_id"] == "req-file-500" and unhandled[0]["level"] == "error"
    assert "Traceback" in unhandled[0]["exception"] and unhandled[0]["path"] == "/test/boom"
    django_request = [line for line in lines if line["logger"] == "django.request"]
    assert django_request and all(line["request_id"] == "req-file-500" for line in django_request)


def test_without_log_file_the_log_goes_to_standard_error():
    assert log_handlers("")["main"]["class"] == "logging.StreamHandler"
    assert log_handlers("var/log/app.log")["main"]["filename"] == "var/log/app.log"


def test_make_run_sends_the_web_servers_log_to_var_log():
    from pathlib import Path
    script = (Path(settings.BASE_DIR) / "scripts" / "run.sh").read_text()
    web = next(line for line in script.splitlines() if "gunicorn" in line and "wsgi" in line)
    assert "LOG_FILE=var/log/app.log" in web
