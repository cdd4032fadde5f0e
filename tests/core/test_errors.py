"""The RFC 9457 error handler: every error is application/problem+json with a stable code and a request id."""
import logging
import uuid

import pytest
from rest_framework.test import APIClient

pytestmark = [pytest.mark.urls("tests.core.urls"), pytest.mark.django_db]
PROBLEM = "application/problem+json"


@pytest.fixture
def client():
    return APIClient(raise_request_exception=False)


def test_validation_error_is_400_with_field_errors(client):
    resp = client.post("/test/validate", {"name": "far-too-long", "count": 0}, format="json")
    assert resp.status_code == 400
    assert resp["Content-Type"] == PROBLEM
    body = resp.json()
    assert body["code"] == "validation_error"
    assert body["status"] == 400
    assert set(body["errors"]) == {"name", "count"}
    assert "5 characters" in body["errors"]["name"][0]
    assert body["request_id"] == resp["X-Request-ID"]
    assert body["instance"] == "/test/validate"


def test_malformed_json_is_400_parse_error(client):
    resp = client.generic("POST", "/test/validate", "{not json", content_type="application/json")
    assert resp.status_code == 400
    assert resp.json()["code"] == "parse_error"


def test_unknown_route_is_404_problem(client):
    resp = client.get("/api/v1/no-such-collection/")
    assert resp.status_code == 404
    assert resp["Content-Type"] == PROBLEM
    assert resp.json()["code"] == "not_found"


def test_a_host_header_this_deployment_does_not_serve_is_400_problem(client, settings):
    """Behind a proxy that forwards every name (its default server), a request for a foreign host gets the API's
    problem document, not Django's HTML page."""
    settings.ALLOWED_HOSTS = ["cloud.example"]
    response = client.get("/api/v1/instances/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "disallowed_host"


def test_domain_error_carries_extra_members(client):
    resp = client.post("/test/quota", {}, format="json")
    assert resp.status_code == 422
    body = resp.json()
    assert (body["code"], body["resource"], body["limit"], body["usage"], body["requested"]) == (
        "quota_exceeded", "gpus", 8, 8, 1)


def test_unhandled_exception_is_500_without_traceback_and_logged_with_request_id(client, caplog):
    caplog.set_level(logging.ERROR)
    resp = client.get("/test/boom", HTTP_X_REQUEST_ID="req-abc-123")
    assert resp.status_code == 500
    assert resp["Content-Type"] == PROBLEM
    text = resp.content.decode()
    assert "Traceback" not in text and "secret internal detail" not in text
    body = resp.json()
    assert body["code"] == "internal_error"
    assert body["request_id"] == "req-abc-123"
    records = [r for r in caplog.records if r.getMessage() == "unhandled_exception"]
    assert len(records) == 1
    assert records[0].exc_info is not None
    assert getattr(records[0], "request_id", None) == "req-abc-123"


def test_unhandled_exception_in_plain_django_view_is_problem_json(client, caplog):
    caplog.set_level(logging.ERROR)
    resp = client.get("/test/plain-boom")
    assert resp.status_code == 500
    assert resp["Content-Type"] == PROBLEM
    assert "secret detail" not in resp.content.decode()
    rid = resp.json()["request_id"]
    assert rid and any(getattr(r, "request_id", None) == rid for r in caplog.records)


def test_invalid_request_id_header_is_replaced(client):
    resp = client.post("/test/validate", {}, format="json", HTTP_X_REQUEST_ID="bad id with spaces!")
    assert resp["X-Request-ID"] != "bad id with spaces!"
    assert resp.json()["request_id"] == resp["X-Request-ID"]


def test_body_over_the_upload_limit_is_413(client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    resp = client.post("/test/validate", {"name": "a" * 5000, "count": 1}, format="json")
    assert resp.status_code == 413
    assert resp["Content-Type"] == PROBLEM
    assert resp.json()["code"] == "payload_too_large"


def test_json_nested_too_deeply_is_400_parse_error(client):
    body = "[" * 100_000 + "]" * 100_000
    resp = client.generic("POST", "/test/validate", body, content_type="application/json")
    assert resp.status_code == 400
    assert resp.json()["code"] == "parse_error"


def test_malformed_cursor_is_400_and_a_good_one_pages(client):
    resp = client.get("/test/page", {"cursor": "garbage"})
    assert resp.status_code == 400
    assert resp.json()["code"] == "invalid_cursor"
    assert client.get("/test/page").status_code == 200


def test_forged_cursor_position_is_400_invalid_cursor_naming_cursor(client):
    import base64

    forged = base64.b64encode(b"p=zzz").decode()  # well-formed cursor, position not a UUID
    resp = client.get("/test/page", {"cursor": forged})
    assert resp.status_code == 400 and resp["Content-Type"] == PROBLEM
    body = resp.json()
    assert body["code"] == "invalid_cursor" and "cursor" in body["errors"]


def test_a_cursor_that_is_not_base64_is_400_invalid_cursor(client):
    for raw in ("%%%%", "not a cursor!", "cD0x*"):
        resp = client.get("/test/page", {"cursor": raw})
        assert (resp.status_code, resp.json()["code"]) == (400, "invalid_cursor"), (raw, resp.content)
        assert "cursor" in resp.json()["errors"]


@pytest.mark.parametrize("size", ["0", "-1", "abc", "2.5", "", "501", "100000"])
def test_bad_page_size_is_400_invalid_page_size(client, size):
    resp = client.get("/test/page", {"page_size": size})
    assert resp.status_code == 400 and resp["Content-Type"] == PROBLEM
    body = resp.json()
    assert body["code"] == "invalid_page_size" and "page_size" in body["errors"]


def test_page_size_up_to_the_maximum_is_served():
    from apps.core.pagination import CursorPagination
    from apps.operations.models import Operation

    Operation.objects.bulk_create([Operation(kind="t", target_type="t", target_id=uuid.uuid4()) for _ in range(503)])
    resp = APIClient().get("/test/page", {"page_size": 500})
    assert resp.status_code == 200
    assert len(resp.json()["results"]) == CursorPagination.max_page_size
    assert len(APIClient().get("/test/page", {"page_size": 3}).json()["results"]) == 3
