"""Quota race: 20 concurrent project creations (20 real PostgreSQL connections) against a limit of 5."""
import threading

import pytest
from django.db import connection, connections

from apps.core.errors import QuotaExceeded
from apps.tenancy.models import OrgRole, Project, Quota
from apps.tenancy.services import project_create

from .helpers import make_org, make_user, member

N = 20
LIMIT = 5


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_creates_leave_exactly_the_quota():
    org = make_org("racing")
    Quota.objects.filter(organization=org, resource="projects").update(limit=LIMIT)
    owner = make_user("owner@racing.test")
    member(owner, org, OrgRole.OWNER)
    barrier = threading.Barrier(N)
    results: list[str] = []
    lock = threading.Lock()

    def create(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            project_create(actor=owner, organization=org, slug=f"p{i}", name=f"P{i}")
            outcome = "created"
        except QuotaExceeded as exc:
            outcome = exc.code
        finally:
            connections["default"].close()  # each thread had its own connection
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(N)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(results) == ["created"] * LIMIT + ["quota_exceeded"] * (N - LIMIT)
    assert Project.objects.filter(organization=org).count() == LIMIT
    assert connection.vendor == "postgresql"


@pytest.mark.django_db
def test_quota_error_names_resource_limit_usage_and_request():
    from .helpers import client_for, token_for

    org = make_org("small", plan="trial")  # trial plan: 2 projects
    owner = make_user("owner@small.test")
    member(owner, org, OrgRole.OWNER)
    client = client_for(token_for(owner, organization=org))
    for slug in ("one", "two"):
        assert client.post("/api/v1/projects/", {"organization": str(org.pk), "slug": slug, "name": slug}).status_code == 201
    response = client.post("/api/v1/projects/", {"organization": str(org.pk), "slug": "three", "name": "three"})
    assert response.status_code == 422
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert {k: body[k] for k in ("code", "resource", "limit", "usage", "requested", "scope")} == {
        "code": "quota_exceeded", "resource": "projects", "limit": 2, "usage": 2, "requested": 1,
        "scope": "organization"}
    assert Project.objects.filter(organization=org).count() == 2
