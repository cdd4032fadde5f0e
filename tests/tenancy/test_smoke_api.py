import pytest

from apps.tenancy.models import OrgRole

from .helpers import client_for, make_org, make_project, make_user, member, token_for


@pytest.mark.django_db
def test_owner_lists_and_creates_projects():
    org = make_org("acme")
    owner = make_user("o@acme.test")
    member(owner, org, OrgRole.OWNER)
    make_project(org, "p1")
    c = client_for(token_for(owner, organization=org))
    r = c.get("/api/v1/projects")
    assert r.status_code == 200, r.content
    assert [p["slug"] for p in r.json()["results"]] == ["p1"]
    r = c.post("/api/v1/projects", {"organization": str(org.id), "slug": "p2", "name": "P2"})
    assert r.status_code == 201, r.content
    r = c.get("/api/v1/me")
    assert r.status_code == 200, r.content
    r = c.get("/api/v1/audit-events")
    assert r.status_code == 200, r.content
    assert [e["action"] for e in r.json()["results"]] == ["project.create", "api_token.create"]
