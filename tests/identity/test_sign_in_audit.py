"""Security events (sign-in, failed sign-in, sign-out, factor changes) land in every organization the user
belongs to, so the owners of each can list them; they never hold a password or a code."""
import pytest
from django_otp.oath import totp
from django_otp.plugins.otp_totp.models import TOTPDevice
from rest_framework.test import APIClient

from apps.audit.models import AuditEvent
from apps.tenancy.models import OrgRole
from tests.tenancy.helpers import client_for, make_org, make_project, make_user, member, token_for

PASSWORD = "a-long-password-42"


def _console() -> tuple[APIClient, str]:
    client = APIClient(enforce_csrf_checks=True)
    return client, client.get("/api/v1/session/").json()["csrf_token"]


def _post_login(client, csrf, email, password, otp=""):
    return client.post("/api/v1/session/", {"email": email, "password": password, "otp_token": otp},
                       format="json", HTTP_X_CSRFTOKEN=csrf)


@pytest.fixture
def world(db):
    acme, beta = make_org("acme"), make_org("beta")
    dev = make_user("dev@acme.test", password=PASSWORD)
    member(dev, acme, OrgRole.MEMBER)
    member(dev, beta, "admin", project=make_project(beta, "web"))
    owners = {}
    for org in (acme, beta):
        owners[org.slug] = make_user(f"owner@{org.slug}.test")
        member(owners[org.slug], org, OrgRole.OWNER)
    return acme, beta, dev, owners


def _actions_seen_by(owner, org) -> list[tuple[str, dict]]:
    r = client_for(token_for(owner, organization=org, scope="read")).get("/api/v1/audit-events/?action=session.")
    assert r.status_code == 200
    return [(e["action"], e["after"]) for e in r.json()["results"]]


def test_sign_in_failures_sign_out_reach_every_organizations_owners(world):
    acme, beta, dev, owners = world
    client, csrf = _console()
    assert _post_login(client, csrf, dev.email, "wrong-password-x").status_code == 401
    r = _post_login(client, csrf, dev.email, PASSWORD)
    assert r.status_code == 200
    csrf = r.json()["csrf_token"]
    assert client.delete("/api/v1/session/", HTTP_X_CSRFTOKEN=csrf).status_code == 204
    for slug, org in (("acme", acme), ("beta", beta)):
        seen = _actions_seen_by(owners[slug], org)
        assert seen == [("session.logout", {"method": "password"}),
                        ("session.login", {"method": "password", "two_factor": False, "recovery_code": False}),
                        ("session.login_failed", {"reason": "invalid_credentials", "method": "password",
                                                  "email": "dev@acme.test"})]
    assert not AuditEvent.objects.filter(after__icontains=PASSWORD).exists()


def test_unknown_email_is_recorded_unscoped(world):
    client, csrf = _console()
    assert _post_login(client, csrf, "nobody@acme.test", "wrong-password-x").status_code == 401
    event = AuditEvent.objects.get(action="session.login_failed")
    assert (event.organization_id, event.actor_id, event.after["email"]) == (None, None, "nobody@acme.test")


def test_wrong_code_and_factor_changes_are_recorded(world):
    acme, beta, dev, owners = world
    client, csrf = _console()
    csrf = _post_login(client, csrf, dev.email, PASSWORD).json()["csrf_token"]
    assert client.post("/api/v1/me/totp/", HTTP_X_CSRFTOKEN=csrf).status_code == 201
    device = TOTPDevice.objects.get(user=dev)
    code = str(totp(device.bin_key, device.step, device.t0, device.digits, device.drift)).zfill(device.digits)
    assert client.post("/api/v1/me/totp/confirm/", {"otp_token": code}, format="json",
                       HTTP_X_CSRFTOKEN=csrf).status_code == 200
    other, csrf2 = _console()
    wrong = "000000" if code != "000000" else "111111"
    assert _post_login(other, csrf2, dev.email, PASSWORD, wrong).json()["code"] == "invalid_otp"
    for org in (acme, beta):
        actions = list(AuditEvent.objects.filter(organization=org, target_id=str(dev.pk))
                       .order_by("created_at").values_list("action", flat=True))
        assert actions == ["session.login", "totp.enrol", "totp.confirm", "session.login_failed"]
    failed = AuditEvent.objects.filter(action="session.login_failed", organization=acme).get()
    assert failed.after == {"reason": "invalid_otp", "method": "password"}
    assert wrong not in str(failed.after) and code not in str(AuditEvent.objects.values_list("after"))


def _with_device(user) -> str:
    device = TOTPDevice.objects.create(user=user, name="default", confirmed=True)
    return str(totp(device.bin_key, device.step, device.t0, device.digits, device.drift)).zfill(device.digits)


def test_right_password_without_the_code_is_recorded_for_every_organizations_owners(world):
    """The password is known to whoever sent it: the owners must see that step, not only completed sign-ins."""
    acme, beta, dev, owners = world
    _with_device(dev)
    client, csrf = _console()
    r = _post_login(client, csrf, dev.email, PASSWORD)
    assert (r.status_code, r.json()["code"]) == (401, "otp_required")
    for slug, org in (("acme", acme), ("beta", beta)):
        assert _actions_seen_by(owners[slug], org) == [("session.otp_required", {"method": "password"})]
    assert not AuditEvent.objects.filter(after__icontains=PASSWORD).exists()


def test_profile_change_is_recorded_in_every_organization(world):
    acme, beta, dev, owners = world
    r = client_for(token_for(dev, organization=acme)).patch("/api/v1/me", {"full_name": "Mallory"}, format="json")
    assert r.status_code == 200
    for slug, org in (("acme", acme), ("beta", beta)):
        seen = client_for(token_for(owners[slug], organization=org, scope="read")).get(
            "/api/v1/audit-events/?action=user.update").json()["results"]
        assert [(e["before"], e["after"], e["target_id"]) for e in seen] == [
            ({"full_name": ""}, {"full_name": "Mallory"}, str(dev.pk))]


@pytest.mark.parametrize("path", ["/api/v1/me/totp/", "/api/v1/me/totp/confirm/", "/api/v1/me/totp/recovery-codes/"])
def test_factor_change_with_an_api_token_is_refused_and_recorded(world, path):
    acme, beta, dev, owners = world
    raw = token_for(dev, organization=acme)
    r = client_for(raw).post(path, {"otp_token": "123456"}, format="json")
    assert (r.status_code, r.json()["code"]) == (403, "interactive_session_required")
    attempted = {"/api/v1/me/totp/": "totp.enrol", "/api/v1/me/totp/confirm/": "totp.confirm",
                 "/api/v1/me/totp/recovery-codes/": "recovery_codes.generate"}[path]
    for slug, org in (("acme", acme), ("beta", beta)):
        seen = client_for(token_for(owners[slug], organization=org, scope="read")).get(
            "/api/v1/audit-events/?action=second_factor.").json()["results"]
        assert [(e["action"], e["after"], e["token_prefix"]) for e in seen] == [
            ("second_factor.change_refused", {"attempted": attempted, "reason": "interactive_session_required",
                                              "method": "token"}, raw.split("_")[1])]
    assert not TOTPDevice.objects.filter(user=dev).exists()
