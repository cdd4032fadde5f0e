"""A removed member keeps no working token in the organization: removing a membership (or leaving) revokes the
user's API tokens bound to the organization or its projects that no remaining membership backs, with the tokens
minted from them, each audited as api_token.revoke (reason membership_removed) where the owners see it."""
import pytest

from apps.identity.models import ApiToken
from apps.tenancy.models import Membership, OrgRole, ProjectRole
from tests.tenancy.helpers import client_for, make_org, make_project, make_user, member, token_for


@pytest.fixture
def world(db):
    acme, beta = make_org("acme"), make_org("beta")
    web = make_project(acme, "web")
    owner = make_user("owner@acme.test")
    member(owner, acme, OrgRole.OWNER)
    dev = make_user("dev@acme.test")
    membership = member(dev, acme, OrgRole.MEMBER)
    member(dev, beta, OrgRole.MEMBER)
    tokens = {"org": token_for(dev, organization=acme), "project": token_for(dev, project=web),
              "beta": token_for(dev, organization=beta)}
    r = client_for(tokens["org"]).post("/api/v1/tokens/", {"name": "ci", "scope": "write", "organization": str(acme.pk)},
                                       format="json")
    assert r.status_code == 201
    tokens["child"] = r.json()["token"]
    return acme, beta, web, owner, dev, membership, tokens


def _works(raw: str) -> bool:
    return client_for(raw).get("/api/v1/me").status_code == 200


def test_removing_a_member_revokes_its_tokens_there_with_their_children(world):
    acme, beta, web, owner, dev, membership, tokens = world
    owner_client = client_for(token_for(owner, organization=acme))
    assert owner_client.delete(f"/api/v1/memberships/{membership.pk}/").status_code == 204
    assert [_works(tokens[k]) for k in ("org", "project", "child", "beta")] == [False, False, False, True]
    events = owner_client.get("/api/v1/audit-events/?action=api_token.revoke").json()["results"]
    assert sorted((e["after"]["prefix"], e["after"]["reason"], e["actor_email"]) for e in events) == sorted(
        (t.prefix, "membership_removed", "owner@acme.test")
        for t in ApiToken.objects.filter(user=dev).exclude(organization=beta))
    assert len(events) == 3


def test_a_member_who_leaves_keeps_only_what_a_remaining_membership_backs(world):
    acme, beta, web, owner, dev, membership, tokens = world
    member(dev, acme, ProjectRole.MEMBER, project=web)
    session = client_for(None)
    session.force_login(dev)
    assert session.delete(f"/api/v1/memberships/{membership.pk}/").status_code == 204
    assert Membership.objects.filter(user=dev, organization=acme).count() == 1
    assert [_works(tokens[k]) for k in ("org", "project", "child", "beta")] == [False, True, False, True]


def test_changing_a_role_or_removing_a_project_membership_under_an_org_role_revokes_nothing(world):
    acme, beta, web, owner, dev, membership, tokens = world
    extra = member(dev, acme, ProjectRole.ADMIN, project=web)
    owner_client = client_for(token_for(owner, organization=acme))
    assert owner_client.delete(f"/api/v1/memberships/{extra.pk}/").status_code == 204
    assert owner_client.patch(f"/api/v1/memberships/{membership.pk}/", {"role": "viewer"},
                              format="json").status_code == 200
    assert all(_works(raw) for raw in tokens.values())
