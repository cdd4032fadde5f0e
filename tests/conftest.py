"""Shared fixtures: API clients and a clean Redis database for tests that use Celery or the cache."""
import pytest
from rest_framework.test import APIClient


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()
