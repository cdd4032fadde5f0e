"""Console session login (CSRF enforced) and TOTP two-factor, enforceable per organization (django-otp)."""
import pytest
from django_otp.oath import totp
from django_otp.plugins.otp_totp.models import TOTPDevice
from rest_framework.test import APIClient

from apps.tenancy.models import OrgRole
from tests.tenancy.helpers import make_org, make_project, make_user, member

PASSWORD = "a-long-password-42"


def _code(device: TOTPDevice, offset: int = 0) -> str:
    return str(totp(device.bin_key, device.step, device.t0, device.digits, device.drift + offset)).zfill(device.digits)


def _console() -> tuple[APIClient, str]:
    client = APIClient(enforce_csrf_checks=True)
    csrf = client.get("/api/v1/session/").json()["csrf_token"]
    return client, csrf


@pytest.fixture
def acme(db):
    org = make_org("acme")
    make_project(org, "web")
    user = make_user("dev@acme.test", password=PASSWORD)
    member(user, org, OrgRole.MEMBER)
    return org, user


def test_login_requires_csrf_and_valid_password(acme):
    client, csrf = _console()
    r = client.post("/api/v1/session/", {"email": "dev@acme.test", "password": PASSWORD}, format="json")
    assert (r.status_code, r.json()["code"]) == (403, "permission_denied")  # no CSRF token
    r = client.post("/api/v1/session/", {"email": "dev@acme.test", "password": "wrong-password"}, format="json",
                    HTTP_X_CSRFTOKEN=csrf)
    assert (r.status_code, r.json()["code"]) == (401, "invalid_credentials")
    r = client.post("/api/v1/session/", {"email": "DEV@acme.test", "password": PASSWORD}, format="json",
                    HTTP_X_CSRFTOKEN=csrf)
    assert r.status_code == 200 and r.json()["authenticated"] is True
    csrf = r.json()["csrf_token"]  # rotated at login
    assert client.get("/api/v1/projects/").status_code == 200
    assert client.patch("/api/v1/me/", {"full_name": "x"}, format="json").status_code == 403  # CSRF again
    assert client.patch("/api/v1/me/", {"full_name": "x"}, format="json", HTTP_X_CSRFTOKEN=csrf).status_code == 200
    assert client.delete("/api/v1/session/", HTTP_X_CSRFTOKEN=csrf).status_code == 204
    assert client.get("/api/v1/projects/").status_code in (401, 403)


def test_org_requiring_2fa_blocks_unverified_sessions_until_enrolled(acme):
    org, user = acme
    org.require_2fa = True
    org.save(update_fields=["require_2fa"])
    client, csrf = _console()
    r = client.post("/api/v1/session/", {"email": user.email, "password": PASSWORD}, format="json",
                    HTTP_X_CSRFTOKEN=csrf)
    csrf = r.json()["csrf_token"]
    r = client.get("/api/v1/projects/")
    assert (r.status_code, r.json()["code"]) == (403, "two_factor_required")
    r = client.post("/api/v1/me/totp/", HTTP_X_CSRFTOKEN=csrf)
    assert r.status_code == 201 and r.json()["config_url"].startswith("otpauth://totp/")
    device = TOTPDevice.objects.get(user=user)
    r = client.post("/api/v1/me/totp/confirm/", {"otp_token": "000000" if _code(device) != "000000" else "111111"},
                    format="json", HTTP_X_CSRFTOKEN=csrf)
    assert (r.status_code, r.json()["code"]) == (400, "invalid_otp")
    r = client.post("/api/v1/me/totp/confirm/", {"otp_token": _code(device)}, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert r.status_code == 200 and r.json()["two_factor_enabled"] is True
    assert client.get("/api/v1/projects/").status_code == 200

    # a fresh login now needs the code
    other, csrf2 = _console()
    r = other.post("/api/v1/session/", {"email": user.email, "password": PASSWORD}, format="json",
                   HTTP_X_CSRFTOKEN=csrf2)
    assert (r.status_code, r.json()["code"]) == (401, "otp_required")
    device.refresh_from_db()
    r = other.post("/api/v1/session/", {"email": user.email, "password": PASSWORD, "otp_token": _code(device, 1)},
                   format="json", HTTP_X_CSRFTOKEN=csrf2)
    assert r.status_code == 200 and r.json()["two_factor_verified"] is True
    assert other.get("/api/v1/projects/").status_code == 200


def test_org_without_2fa_requirement_allows_plain_sessions(acme):
    client, csrf = _console()
    client.post("/api/v1/session/", {"email": "dev@acme.test", "password": PASSWORD}, format="json",
                HTTP_X_CSRFTOKEN=csrf)
    assert client.get("/api/v1/projects/").status_code == 200
