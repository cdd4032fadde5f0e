"""Refused escalation attempts are audited for the organization owners: minting a token wider than, longer than
or from a read-only parent, and a two-factor reset by a non-staff token, were refused but left no trace, though
they are what an attacker with a stolen token probes first. Ordinary validation errors are not recorded."""
import datetime as dt

import pytest

from apps.audit.models import AuditEvent
from apps.tenancy.models import OrgRole

from ..tenancy.helpers import client_for, make_org, make_project, make_user, member, token_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db):
    acme, beta = make_org("acme"), make_org("beta")
    web, ml = make_project(acme, "web"), make_project(acme, "ml")
    dev = make_user("dev@acme.test")
    member(dev, acme, OrgRole.MEMBER)
    member(dev, beta, OrgRole.MEMBER)
    owners = {}
    for org in (acme, beta):
        owners[org.slug] = make_user(f"owner@{org.slug}.test")
        member(owners[org.slug], org, OrgRole.OWNER)
    return acme, beta, web, ml, dev, owners


def _refusals_seen_by(owner, org, action="api_token.create_refused") -> list[dict]:
    r = client_for(token_for(owner, organization=org, scope="read")).get(f"/api/v1/audit-events/?action={action}")
    assert r.status_code == 200, r.content
    return [e["after"] for e in r.json()["results"]]


def test_refused_token_mints_are_audited_in_every_organization_of_the_user(world):
    acme, beta, web, _ml, dev, owners = world
    project_raw = token_for(dev, project=web)
    project_token = client_for(project_raw)
    read_only = client_for(token_for(dev, scope="read", project=web))
    attempts = [
        (project_token, {"name": "x", "scope": "write", "organization": str(acme.pk)}, 403, "token_binding_wider"),
        (project_token, {"name": "x", "scope": "write", "project": str(web.pk),
                         "expires_at": (dt.datetime.now(dt.UTC) + dt.timedelta(days=300)).isoformat()},
         400, "token_outlives_parent"),
        (read_only, {"name": "x", "scope": "read", "project": str(web.pk)}, 403, "token_read_only"),
    ]
    for client, body, status, code in attempts:
        r = client.post("/api/v1/tokens/", body, format="json")
        assert (r.status_code, r.json()["code"]) == (status, code), r.content
    # an ordinary validation error is not an escalation attempt
    r = project_token.post("/api/v1/tokens/", {"name": "", "scope": "write", "project": str(web.pk)}, format="json")
    assert r.status_code == 400 and r.json()["code"] != "token_outlives_parent"
    for slug, org in (("acme", acme), ("beta", beta)):
        seen = _refusals_seen_by(owners[slug], org)
        assert sorted(e["reason"] for e in seen) == sorted(code for *_rest, code in attempts), seen
        assert all(e["parent"] and e["parent"] in project_raw or e["reason"] == "token_read_only" for e in seen)
        assert [e["binding"] for e in seen if e["reason"] == "token_binding_wider"] == [f"organization:{acme.pk}"]
    assert not any("token" in (e.after or {}) for e in AuditEvent.objects.filter(action="api_token.create_refused"))


def test_a_two_factor_reset_by_a_tenant_token_is_refused_and_audited(world):
    acme, beta, _web, _ml, dev, owners = world
    victim = make_user("victim@acme.test")
    member(victim, acme, OrgRole.MEMBER)
    r = client_for(token_for(dev, organization=acme)).post(
        f"/api/v1/users/{victim.pk}/reset-two-factor/", {"reason": "please"}, format="json")
    assert r.status_code == 403, r.content
    for slug, org in (("acme", acme), ("beta", beta)):
        seen = _refusals_seen_by(owners[slug], org, "second_factor.change_refused")
        assert seen == [{"attempted": "totp.reset", "reason": "permission_denied", "user": str(victim.pk)}]
