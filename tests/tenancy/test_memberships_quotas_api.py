"""Project-level invitations and memberships, quota listing with usage, token expiry bounds."""
import datetime as dt

import pytest
from django.core import mail

from apps.tenancy.models import Membership, OrgRole, Quota

from .helpers import client_for, make_org, make_project, make_user, member, org_owner_client, token_for


@pytest.fixture
def acme(db):
    return org_owner_client()


@pytest.mark.django_db(transaction=True)
def test_project_invitation_gives_a_project_role_only():
    org = make_org("acme")
    owner = make_user("owner@acme.test")
    member(owner, org, OrgRole.OWNER)
    web, ml = make_project(org, "web"), make_project(org, "ml")
    client = client_for(token_for(owner, organization=org))
    r = client.post("/api/v1/invitations/", {"organization": str(org.pk), "project": str(web.pk),
                                             "email": "contractor@else.test", "role": "member"})
    assert r.status_code == 201, r.content
    token = mail.outbox[0].body.split("?token=")[1].split()[0]
    r = client_for(None).post("/api/v1/invitations/accept/", {"token": token, "password": "a-long-password-42"})
    assert r.status_code == 201 and r.json()["scope"] == "project" and r.json()["project"] == str(web.pk)
    contractor = Membership.objects.get(project=web).user
    c = client_for(token_for(contractor, project=web))
    assert [p["slug"] for p in c.get("/api/v1/projects/").json()["results"]] == ["web"]
    assert c.get(f"/api/v1/projects/{ml.pk}/").status_code == 404


def test_project_admin_manages_project_members_but_not_the_organization(acme):
    org, _owner, _client = acme
    web = make_project(org, "web")
    lead = make_user("lead@acme.test")
    member(lead, org, "admin", project=web)
    make_user("dev@acme.test")
    c = client_for(token_for(lead, project=web))
    r = c.post("/api/v1/memberships/", {"organization": str(org.pk), "project": str(web.pk),
                                        "user_email": "dev@acme.test", "role": "viewer"})
    assert (r.status_code, r.json()["status"], r.json()["project"]) == (202, "pending", str(web.pk)), r.content
    r = c.post("/api/v1/memberships/", {"organization": str(org.pk), "user_email": "dev@acme.test",
                                        "role": "member"})
    assert (r.status_code, r.json()["code"]) == (403, "permission_denied")


def test_quota_list_shows_limits_and_real_usage(acme):
    org, _owner, client = acme
    make_project(org, "one")
    make_project(org, "two")
    rows = {q["resource"]: q for q in client.get("/api/v1/quotas/", {"organization": str(org.pk),
                                                                     "page_size": 100}).json()["results"]}
    assert rows["projects"]["limit"] == 10 and rows["projects"]["usage"] == 2
    assert rows["projects"]["scope"] == "organization"
    assert set(rows) == set(Quota.objects.filter(organization=org).values_list("resource", flat=True))


def test_project_quota_cannot_name_an_organization_only_resource(acme):
    org, _owner, client = acme
    web = make_project(org, "web")
    r = client.post("/api/v1/quotas/", {"organization": str(org.pk), "project": str(web.pk),
                                        "resource": "projects", "limit": 1})
    assert (r.status_code, r.json()["code"]) == (400, "unknown_resource")
    r = client.post("/api/v1/quotas/", {"organization": str(org.pk), "project": str(web.pk),
                                        "resource": "gpus:", "limit": 1})
    assert (r.status_code, r.json()["code"]) == (400, "unknown_resource")


def test_token_expiry_bounds(acme):
    org, _owner, client = acme
    too_late = (dt.datetime.now(dt.UTC) + dt.timedelta(days=400)).isoformat()
    r = client.post("/api/v1/tokens/", {"name": "x", "organization": str(org.pk), "expires_at": too_late})
    assert (r.status_code, list(r.json()["errors"])) == (400, ["expires_at"])
    past = (dt.datetime.now(dt.UTC) - dt.timedelta(days=1)).isoformat()
    assert client.post("/api/v1/tokens/", {"name": "x", "organization": str(org.pk),
                                           "expires_at": past}).status_code == 400
    r = client.post("/api/v1/tokens/", {"name": "x", "organization": str(org.pk)})
    expires = dt.datetime.fromisoformat(r.json()["expires_at"])
    assert dt.timedelta(days=89) < expires - dt.datetime.now(dt.UTC) <= dt.timedelta(days=90)


def test_a_project_token_reads_the_limits_that_apply_to_its_project(acme):
    """A project-bound token (what a tenant gives Terraform) lists its organization's limits and its project's, with
    usage, with or without `?project=`; never another project's or another tenant's; it cannot change them."""
    org, owner, client = acme
    web, ml = make_project(org, "web"), make_project(org, "ml")
    for project, limit in ((web, 4), (ml, 2)):
        r = client.post("/api/v1/quotas/", {"organization": str(org.pk), "project": str(project.pk),
                                            "resource": "gpus", "limit": limit})
        assert r.status_code == 201, r.content
    org_rows = {("organization", r, None) for r in Quota.objects.filter(organization=org, project=None)
                .values_list("resource", flat=True)}
    token = client_for(token_for(owner, project=web))

    def listed(**params):
        r = token.get("/api/v1/quotas/", {"page_size": 100, **params})
        assert r.status_code == 200, r.content
        return {(q["scope"], q["resource"], q["project"]) for q in r.json()["results"]}, r.json()["results"]

    everything, rows = listed()
    assert everything == org_rows | {("project", "gpus", str(web.pk))}
    assert next(q for q in rows if q["scope"] == "organization" and q["resource"] == "projects")["usage"] == 2
    assert listed(project=str(web.pk))[0] == everything
    assert listed(project=str(web.pk), scope="project")[0] == {("project", "gpus", str(web.pk))}
    assert listed(scope="organization")[0] == org_rows
    r = token.get("/api/v1/quotas/", {"project": str(ml.pk)})
    assert (r.status_code, r.json()["errors"]["project"]) == (400, ["Not found."])
    org_gpus = Quota.objects.get(organization=org, project=None, resource="gpus")
    assert token.get(f"/api/v1/quotas/{org_gpus.pk}/").status_code == 200
    r = token.patch(f"/api/v1/quotas/{org_gpus.pk}/", {"limit": 100})
    assert r.status_code == 403, r.content
    ml_gpus = Quota.objects.get(project=ml, resource="gpus")
    assert token.get(f"/api/v1/quotas/{ml_gpus.pk}/").status_code == 404
    # Another tenant's project token sees its own organization's limits only.
    other, other_owner, _ = org_owner_client("globex", "owner@globex.test")
    stranger = client_for(token_for(other_owner, project=make_project(other, "x")))
    rows = stranger.get("/api/v1/quotas/", {"page_size": 100}).json()["results"]
    assert rows and {q["organization"] for q in rows} == {str(other.pk)}
    assert stranger.get("/api/v1/quotas/", {"project": str(web.pk)}).status_code == 400
    assert stranger.get(f"/api/v1/quotas/{org_gpus.pk}/").status_code == 404
