"""A token cannot outgrow the token that mints it (ADR 0100): a token with two minutes left minted a fresh
90-day token, so a stolen token could be renewed for ever. Organization owners list and revoke the tokens bound
to their organization, whoever holds them."""
import datetime as dt

import pytest

from apps.audit.models import AuditEvent
from apps.identity.models import ApiToken
from apps.identity.services import api_token_create
from apps.tenancy.models import OrgRole
from tests.tenancy.helpers import client_for, make_org, make_project, make_user, member, token_for

pytestmark = pytest.mark.django_db


def _short_token(user, minutes=2, **binding) -> tuple[ApiToken, str]:
    return api_token_create(actor=None, user=user, name="short", scope="write",
                            expires_at=dt.datetime.now(dt.UTC) + dt.timedelta(minutes=minutes), **binding)


def test_a_token_with_two_minutes_left_cannot_mint_a_longer_one():
    org = make_org("acme")
    owner = make_user("owner@acme.test")
    member(owner, org, OrgRole.OWNER)
    parent, raw = _short_token(owner, organization=org)
    client = client_for(raw)
    far = (dt.datetime.now(dt.UTC) + dt.timedelta(days=90)).isoformat()
    r = client.post("/api/v1/tokens/", {"name": "renew", "scope": "write", "organization": str(org.pk),
                                        "expires_at": far})
    assert (r.status_code, r.json()["code"], list(r.json()["errors"])) == (400, "token_outlives_parent",
                                                                          ["expires_at"])
    r = client.post("/api/v1/tokens/", {"name": "renew", "scope": "write", "organization": str(org.pk)})
    assert r.status_code == 201, r.content
    child = ApiToken.objects.get(pk=r.json()["id"])
    assert child.expires_at <= parent.expires_at  # the default lifetime is cut to the parent's
    assert child.parent_id == parent.pk and r.json()["parent"] == str(parent.pk)
    assert ApiToken.objects.filter(user=owner).count() == 2


def test_a_token_cannot_mint_a_wider_binding_or_scope():
    org = make_org("acme")
    web, ml = make_project(org, "web"), make_project(org, "ml")
    owner = make_user("owner@acme.test", staff_role="")
    member(owner, org, OrgRole.OWNER)
    project_client = client_for(token_for(owner, project=web))
    r = project_client.post("/api/v1/tokens/", {"name": "org", "scope": "write", "organization": str(org.pk)})
    assert (r.status_code, r.json()["code"]) == (403, "token_binding_wider")
    r = project_client.post("/api/v1/tokens/", {"name": "ml", "scope": "write", "project": str(ml.pk)})
    assert r.status_code == 400  # another project is not visible through a project token
    r = project_client.post("/api/v1/tokens/", {"name": "web", "scope": "read", "project": str(web.pk)})
    assert r.status_code == 201, r.content
    org_client = client_for(token_for(owner, organization=org))
    r = org_client.post("/api/v1/tokens/", {"name": "staff", "scope": "write", "staff": True})
    assert (r.status_code, r.json()["code"]) == (403, "token_binding_wider")
    r = org_client.post("/api/v1/tokens/", {"name": "ml", "scope": "write", "project": str(ml.pk)})
    assert r.status_code == 201, r.content  # narrower: a project of the token's organization
    reader = client_for(token_for(owner, organization=org, scope="read"))
    r = reader.post("/api/v1/tokens/", {"name": "r", "scope": "read", "organization": str(org.pk)})
    assert (r.status_code, r.json()["code"]) == (403, "token_read_only")


def test_revoking_a_token_revokes_the_tokens_it_minted():
    org = make_org("acme")
    owner = make_user("owner@acme.test")
    member(owner, org, OrgRole.OWNER)
    session_like = client_for(token_for(owner, organization=org))
    parent = session_like.post("/api/v1/tokens/", {"name": "p", "scope": "write",
                                                   "organization": str(org.pk)}).json()
    child = client_for(parent["token"]).post("/api/v1/tokens/", {"name": "c", "scope": "write",
                                                                 "organization": str(org.pk)}).json()
    grandchild = client_for(child["token"]).post("/api/v1/tokens/", {"name": "g", "scope": "read",
                                                                     "organization": str(org.pk)}).json()
    assert client_for(grandchild["token"]).get("/api/v1/me/").status_code == 200
    assert session_like.delete(f"/api/v1/tokens/{parent['id']}/").status_code == 204
    for row in (parent, child, grandchild):
        assert client_for(row["token"]).get("/api/v1/me/").status_code == 401
    revoked = set(AuditEvent.objects.filter(action="api_token.revoke").values_list("target_id", flat=True))
    assert revoked == {parent["id"], child["id"], grandchild["id"]}


def test_owner_lists_and_revokes_members_tokens_admin_and_members_do_not():
    org, other = make_org("acme"), make_org("other")
    web = make_project(org, "web")
    owner, admin, dev = make_user("owner@acme.test"), make_user("admin@acme.test"), make_user("dev@acme.test")
    member(owner, org, OrgRole.OWNER)
    member(admin, org, OrgRole.ADMIN)
    member(dev, org, OrgRole.MEMBER)
    member(dev, other, OrgRole.OWNER)
    dev_raw = token_for(dev, project=web)
    dev_other_raw = token_for(dev, organization=other)
    dev_token = ApiToken.objects.get(user=dev, project=web)
    dev_other = ApiToken.objects.get(user=dev, organization=other)
    owner_client = client_for(token_for(owner, organization=org))
    listed = owner_client.get("/api/v1/tokens/", {"user_email": "dev@acme.test"}).json()["results"]
    assert [row["id"] for row in listed] == [str(dev_token.pk)]  # not dev's token of another organization
    assert owner_client.get(f"/api/v1/tokens/{dev_other.pk}/").status_code == 404
    admin_client = client_for(token_for(admin, organization=org))
    assert admin_client.get("/api/v1/tokens/", {"user_email": "dev@acme.test"}).json()["results"] == []
    assert admin_client.delete(f"/api/v1/tokens/{dev_token.pk}/").status_code == 404
    assert client_for(dev_raw).get("/api/v1/me/").status_code == 200
    assert owner_client.delete(f"/api/v1/tokens/{dev_token.pk}/").status_code == 204
    assert client_for(dev_raw).get("/api/v1/me/").status_code == 401
    assert client_for(dev_other_raw).get("/api/v1/me/").status_code == 200
    event = AuditEvent.objects.get(action="api_token.revoke", target_id=str(dev_token.pk), organization=org)
    assert (event.actor_id, event.organization_id, event.after["user"]) == (owner.pk, org.pk, "dev@acme.test")
    assert any(e["action"] == "api_token.revoke"
               for e in owner_client.get("/api/v1/audit-events/").json()["results"])


def test_token_events_reach_the_owners_of_every_organization_of_the_holder():
    """A token bound to one organization is still its holder's credential: the owners of the holder's other
    organizations see it created and revoked too."""
    acme, beta = make_org("acme"), make_org("beta")
    dev = make_user("dev@acme.test")
    member(dev, acme, OrgRole.MEMBER)
    member(dev, beta, OrgRole.VIEWER)
    beta_owner = make_user("owner@beta.test")
    member(beta_owner, beta, OrgRole.OWNER)
    dev_client = client_for(token_for(dev, organization=acme))
    created = dev_client.post("/api/v1/tokens/", {"name": "ci", "scope": "read", "organization": str(acme.pk)})
    assert created.status_code == 201, created.content
    assert dev_client.delete(f"/api/v1/tokens/{created.json()['id']}/").status_code == 204
    seen = client_for(token_for(beta_owner, organization=beta, scope="read")).get(
        "/api/v1/audit-events/", {"action": "api_token.", "target_id": created.json()["id"]}).json()["results"]
    assert sorted(e["action"] for e in seen) == ["api_token.create", "api_token.revoke"]
    assert {e["organization"] for e in seen} == {str(beta.pk)}
    assert seen[0]["actor_email"] == "dev@acme.test"


def test_a_mint_racing_its_parents_revocation_is_refused_and_leaves_no_child():
    """Four threads minting from a token while its owner revoked it left 4 of 46 children alive: the mint read its
    parent when the request was authenticated and never again. The mint now locks the parent row and re-checks it
    in its own transaction, so a revocation that commits between authentication and the mint refuses the mint."""
    from apps.core.errors import DomainError
    from apps.identity.services import api_token_revoke

    org = make_org("acme")
    owner = make_user("owner@acme.test")
    member(owner, org, OrgRole.OWNER)
    parent, _raw = _short_token(owner, minutes=60, organization=org)
    owner.api_token = ApiToken.objects.get(pk=parent.pk)  # as authentication left it: live
    api_token_revoke(actor=None, token=parent)  # the owner revokes it meanwhile
    with pytest.raises(DomainError) as refused:
        api_token_create(actor=owner, name="child", scope="write", organization=org)
    assert (refused.value.status, refused.value.code) == (401, "authentication_failed")
    assert ApiToken.objects.filter(user=owner).count() == 1
    assert not ApiToken.objects.filter(parent_id=parent.pk).exists()
