import pytest


@pytest.mark.django_db
def test_healthz_and_readyz_ok(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    resp = client.get("/readyz")
    assert resp.status_code == 200
    assert resp.json()["checks"] == {"postgresql": "ok", "redis": "ok"}


@pytest.mark.django_db
def test_readyz_503_problem_when_redis_unreachable(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    resp = client.get("/readyz")
    assert resp.status_code == 503
    assert resp["Content-Type"] == "application/problem+json"
    body = resp.json()
    assert body["code"] == "not_ready"
    assert list(body["errors"]) == ["redis"]
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    assert client.get("/readyz").status_code == 200


@pytest.mark.django_db
def test_metrics_exposes_request_counts_and_queue_depths(client):
    client.get("/healthz")
    text = client.get("/metrics").content.decode()
    assert 'gpucloud_http_requests_total{method="GET",route="/healthz",status="200"}' in text
    assert 'gpucloud_celery_queue_depth{queue="provisioning"}' in text
    assert "gpucloud_http_request_duration_seconds_bucket" in text
