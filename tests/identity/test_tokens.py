"""API tokens: shown once, stored hashed, never logged; expired/revoked → 401; scope and binding narrow."""
import datetime as dt
import io
import logging

import pytest
import time_machine
from django.core.management import call_command
from django.db import connection

from apps.identity.models import ApiToken, StaffRole
from apps.tenancy.models import OrgRole
from tests.tenancy.helpers import (
    client_for,
    make_org,
    make_project,
    make_user,
    member,
    org_owner_client,
    token_for,
)


@pytest.fixture
def owner_client(db):
    return org_owner_client()


def _all_database_text() -> str:
    chunks = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT t::text FROM "{table}" t')
            chunks.extend(row[0] for row in cursor.fetchall())
    return "\n".join(chunks)


@pytest.mark.django_db
def test_secret_shown_once_never_stored_listed_or_logged(owner_client, caplog):
    org, owner, client = owner_client
    caplog.set_level(logging.DEBUG)
    r = client.post("/api/v1/tokens/", {"name": "terraform", "scope": "write", "organization": str(org.pk)})
    assert r.status_code == 201, r.content
    secret = r.json()["token"]
    prefix = r.json()["prefix"]
    assert secret.startswith(f"gpc_{prefix}_") and len(secret) == 4 + 12 + 1 + 43
    new = client_for(secret)
    assert new.get("/api/v1/me/").json()["token"]["prefix"] == prefix
    listed = client.get("/api/v1/tokens/").content.decode() + client.get(f"/api/v1/tokens/{r.json()['id']}/").content.decode()
    assert secret not in listed and prefix in listed
    secret_part = secret[len(f"gpc_{prefix}_"):]  # the secret's own alphabet (base64url) includes "_"
    database = _all_database_text()
    assert secret_part not in database and prefix in database
    assert secret_part not in caplog.text


@pytest.mark.django_db
def test_expired_revoked_malformed_and_unknown_tokens_get_401(owner_client):
    org, owner, client = owner_client
    body = {"name": "short", "scope": "read", "organization": str(org.pk),
            "expires_at": (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).isoformat()}
    created = client.post("/api/v1/tokens/", body).json()
    secret = created["token"]
    assert client_for(secret).get("/api/v1/projects/").status_code == 200
    with time_machine.travel(dt.datetime.now(dt.UTC) + dt.timedelta(days=2), tick=False):
        r = client_for(secret).get("/api/v1/projects/")
        assert (r.status_code, r.json()["code"]) == (401, "authentication_failed")
        assert r["WWW-Authenticate"] == 'Bearer realm="api"'
    assert client.delete(f"/api/v1/tokens/{created['id']}/").status_code == 204
    assert client_for(secret).get("/api/v1/projects/").status_code == 401
    assert ApiToken.objects.get(pk=created["id"]).revoked_at is not None
    for bad in ("gpc_nothex_" + "a" * 43, secret[:-1] + ("A" if secret[-1] != "A" else "B"), "garbage"):
        assert client_for(bad).get("/api/v1/projects/").status_code == 401


@pytest.mark.django_db
def test_last_used_at_is_recorded(owner_client):
    org, owner, client = owner_client
    client.get("/api/v1/projects/")
    assert ApiToken.objects.get(user=owner).last_used_at is not None


@pytest.mark.django_db
def test_read_token_cannot_mutate_or_mint_write_tokens(owner_client):
    org, owner, _client = owner_client
    reader = client_for(token_for(owner, organization=org, scope="read"))
    r = reader.post("/api/v1/projects/", {"organization": str(org.pk), "slug": "x", "name": "x"})
    assert (r.status_code, r.json()["code"]) == (403, "token_read_only")
    r = reader.post("/api/v1/tokens/", {"name": "w", "scope": "write", "organization": str(org.pk)})
    assert (r.status_code, r.json()["code"]) == (403, "token_read_only")


@pytest.mark.django_db
def test_tenant_token_of_a_staff_user_has_no_staff_powers():
    org = make_org("acme")
    other = make_org("other")
    staff = make_user("ops@provider.test", staff_role=StaffRole.OPERATOR)
    member(staff, org, OrgRole.VIEWER)
    client = client_for(token_for(staff, organization=org, scope="write"))
    assert client.get(f"/api/v1/organizations/{other.pk}/").status_code == 404
    assert client.get("/api/v1/me/").json()["staff_role"] == ""
    staff_client = client_for(token_for(staff, staff=True))
    assert staff_client.get(f"/api/v1/organizations/{other.pk}/").status_code == 200
    staff.staff_role = ""
    staff.save(update_fields=["staff_role"])
    assert staff_client.get("/api/v1/me/").status_code == 401  # a staff token dies with the staff role


@pytest.mark.django_db
def test_token_cannot_widen_access():
    org = make_org("acme")
    p1 = make_project(org, "p1")
    dev = make_user("dev@acme.test")
    member(dev, org, OrgRole.MEMBER)
    project_client = client_for(token_for(dev, project=p1))
    r = project_client.post("/api/v1/tokens/", {"name": "wider", "scope": "write", "organization": str(org.pk)})
    assert (r.status_code, r.json()["code"]) == (403, "token_binding_wider")  # a project token mints inside it
    r = project_client.post("/api/v1/tokens/", {"name": "staff", "scope": "write", "staff": True})
    assert (r.status_code, r.json()["code"]) == (403, "token_binding_wider")
    r = project_client.post("/api/v1/tokens/", {"name": "both", "project": str(p1.pk), "organization": str(org.pk)})
    assert r.status_code == 400
    assert ApiToken.objects.filter(user=dev).count() == 1


@pytest.mark.django_db
def test_service_account_token_for_automation(owner_client):
    org, owner, client = owner_client
    account = client.post("/api/v1/service-accounts/", {"organization": str(org.pk), "name": "terraform",
                                                        "role": "member"}).json()
    r = client.post("/api/v1/tokens/", {"name": "tf", "scope": "write", "organization": str(org.pk),
                                        "service_account": account["id"]})
    assert r.status_code == 201, r.content
    bot = client_for(r.json()["token"])
    assert bot.get("/api/v1/me/").json()["is_service_account"] is True
    assert bot.post("/api/v1/projects/", {"organization": str(org.pk), "slug": "x", "name": "x"}).status_code == 403
    assert client.delete(f"/api/v1/service-accounts/{account['id']}/").status_code == 204
    assert bot.get("/api/v1/me/").status_code == 401


@pytest.mark.django_db
def test_create_api_token_command_prints_a_working_token():
    org = make_org("acme")
    make_project(org, "web")
    owner = make_user("owner@acme.test")
    member(owner, org, OrgRole.OWNER)
    make_user("ops@provider.test", staff_role=StaffRole.OPERATOR)
    for args in (["--project", "acme/web", "--scope", "write"], ["--organization", "acme"], ["--project", "web"]):
        out = io.StringIO()
        call_command("create_api_token", "--email", "owner@acme.test", *args, stdout=out)
        assert client_for(out.getvalue().strip()).get("/api/v1/projects/").status_code == 200
    out = io.StringIO()
    call_command("create_api_token", "--email", "ops@provider.test", "--staff", stdout=out)
    assert client_for(out.getvalue().strip()).get(f"/api/v1/organizations/{org.pk}/").status_code == 200
    from django.core.management import CommandError

    with pytest.raises(CommandError):
        call_command("create_api_token", "--email", "owner@acme.test", "--staff", stdout=io.StringIO())
    with pytest.raises(CommandError):
        call_command("create_api_token", "--email", "nobody@acme.test", "--organization", "acme",
                     stdout=io.StringIO())


@pytest.mark.django_db
def test_bound_token_sees_and_revokes_only_tokens_inside_its_binding():
    org = make_org("acme")
    p1, p2 = make_project(org, "p1"), make_project(org, "p2")
    owner = make_user("owner@acme.test")
    member(owner, org, OrgRole.OWNER)
    raw1, raw2, raw_org = token_for(owner, project=p1), token_for(owner, project=p2), token_for(owner, organization=org)
    t1, t2, t_org = (ApiToken.objects.get(project=p1), ApiToken.objects.get(project=p2),
                     ApiToken.objects.get(organization=org))
    p1_client = client_for(raw1)
    listed = {row["id"] for row in p1_client.get("/api/v1/tokens/").json()["results"]}
    assert listed == {str(t1.pk)}
    for other in (t2, t_org):
        assert p1_client.get(f"/api/v1/tokens/{other.pk}/").status_code == 404
        assert p1_client.delete(f"/api/v1/tokens/{other.pk}/").status_code == 404
        assert ApiToken.objects.get(pk=other.pk).revoked_at is None
    assert client_for(raw2).get("/api/v1/me/").status_code == 200  # still valid
    org_listed = {row["id"] for row in client_for(raw_org).get("/api/v1/tokens/").json()["results"]}
    assert org_listed == {str(t1.pk), str(t2.pk), str(t_org.pk)}
