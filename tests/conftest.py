"""Shared fixtures: API clients; Celery runs tasks eagerly in-process unless a test starts a real worker."""
import pytest
from rest_framework.test import APIClient

from gpucloud.celery import app as celery_app


@pytest.fixture(autouse=True, scope="session")
def _celery_eager():
    celery_app.conf.task_always_eager = True
    celery_app.conf.task_eager_propagates = True
    yield


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


@pytest.fixture(autouse=True)
def _sign_in_throttle_loose(settings):
    """Suites sign in often from one address; tests of the throttle itself set `SIGN_IN_THROTTLE_RATES` low."""
    settings.SIGN_IN_THROTTLE_RATES = {"sign_in_account": "100000/min", "sign_in_address": "100000/min"}
