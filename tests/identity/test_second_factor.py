"""Second factors stay their user's: only a recent interactive sign-in (never an API token) enrols, confirms or
removes one; recovery codes (shown once, stored hashed) get a user without the device back in; staff reset a
factor with an audited reason; staff themselves must have one."""
import datetime as dt

import pytest
import time_machine
from django_otp.oath import totp
from django_otp.plugins.otp_totp.models import TOTPDevice
from rest_framework.test import APIClient

from apps.audit.models import AuditEvent
from apps.identity.models import RecoveryCode, StaffRole
from apps.identity.recovery import digest
from apps.tenancy.models import OrgRole
from tests.tenancy.helpers import client_for, make_org, make_project, make_user, member, token_for

PASSWORD = "a-long-password-42"


def _code(device: TOTPDevice, offset: int = 0) -> str:
    return str(totp(device.bin_key, device.step, device.t0, device.digits, device.drift + offset)).zfill(device.digits)


def _sign_in(email: str, otp_token: str = "") -> tuple[APIClient, str]:
    client = APIClient(enforce_csrf_checks=True)
    csrf = client.get("/api/v1/session/").json()["csrf_token"]
    body = {"email": email, "password": PASSWORD, **({"otp_token": otp_token} if otp_token else {})}
    r = client.post("/api/v1/session/", body, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert r.status_code == 200, r.json()
    return client, r.json()["csrf_token"]


def _enrol(client: APIClient, csrf: str, user) -> tuple[TOTPDevice, list[str]]:
    assert client.post("/api/v1/me/totp/", HTTP_X_CSRFTOKEN=csrf).status_code == 201
    device = TOTPDevice.objects.get(user=user, confirmed=False)
    r = client.post("/api/v1/me/totp/confirm/", {"otp_token": _code(device)}, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert r.status_code == 200, r.json()
    device.refresh_from_db()
    return device, r.json()["recovery_codes"]


@pytest.fixture
def dev(db):
    org = make_org("acme")
    project = make_project(org, "web")
    user = make_user("dev@acme.test", password=PASSWORD)
    member(user, org, OrgRole.MEMBER)
    member(user, org, "admin", project=project)
    return org, project, user


def test_a_project_write_token_cannot_enrol_or_confirm_a_factor(dev):
    org, project, user = dev
    api = client_for(token_for(user, scope="write", project=project))
    r = api.post("/api/v1/me/totp/")
    assert (r.status_code, r.json()["code"]) == (403, "interactive_session_required")
    assert not TOTPDevice.objects.filter(user=user).exists()
    r = api.post("/api/v1/me/totp/confirm/", {"otp_token": "123456"}, format="json")
    assert (r.status_code, r.json()["code"]) == (403, "interactive_session_required")
    r = api.delete("/api/v1/me/totp/")
    assert (r.status_code, r.json()["code"]) == (403, "interactive_session_required")
    # the user's own password sign-in still needs no code
    _sign_in(user.email)


def test_a_token_cannot_remove_an_existing_factor(dev):
    _org, project, user = dev
    client, csrf = _sign_in(user.email)
    device, _codes = _enrol(client, csrf, user)
    r = client_for(token_for(user, scope="write", project=project)).delete("/api/v1/me/totp/")
    assert (r.status_code, r.json()["code"]) == (403, "interactive_session_required")
    assert TOTPDevice.objects.filter(pk=device.pk, confirmed=True).exists()


def test_a_stale_sign_in_cannot_enrol_or_remove(dev):
    _org, _project, user = dev
    client, csrf = _sign_in(user.email)
    with time_machine.travel(dt.datetime.now(dt.UTC) + dt.timedelta(minutes=11)):
        r = client.post("/api/v1/me/totp/", HTTP_X_CSRFTOKEN=csrf)
        assert (r.status_code, r.json()["code"]) == (403, "reauthentication_required")
        assert r.json()["max_age_seconds"] == 600
    assert not TOTPDevice.objects.filter(user=user).exists()
    device, _codes = _enrol(client, csrf, user)
    with time_machine.travel(dt.datetime.now(dt.UTC) + dt.timedelta(minutes=11)):
        r = client.delete("/api/v1/me/totp/", HTTP_X_CSRFTOKEN=csrf)
        assert (r.status_code, r.json()["code"]) == (403, "reauthentication_required")
    assert TOTPDevice.objects.filter(pk=device.pk).exists()


def test_remove_with_a_fresh_verified_session(dev):
    org, _project, user = dev
    client, csrf = _sign_in(user.email)
    device, _codes = _enrol(client, csrf, user)
    fresh, csrf2 = _sign_in(user.email, otp_token=_code(device, 1))
    r = fresh.delete("/api/v1/me/totp/", HTTP_X_CSRFTOKEN=csrf2)
    assert r.status_code == 204
    assert not TOTPDevice.objects.filter(user=user).exists() and not RecoveryCode.objects.exists()
    assert fresh.get("/api/v1/me/").json()["two_factor_enabled"] is False
    r = fresh.delete("/api/v1/me/totp/", HTTP_X_CSRFTOKEN=csrf2)
    assert (r.status_code, r.json()["code"]) == (400, "no_second_factor")
    events = AuditEvent.objects.filter(action="totp.remove", actor=user)
    assert [e.organization_id for e in events] == [org.pk]


def test_a_second_device_needs_the_current_factor(dev):
    """An unverified session of a user with a device (a single sign-on without MFA is one) cannot replace it."""
    _org, _project, user = dev
    client, csrf = _sign_in(user.email)
    device, _codes = _enrol(client, csrf, user)
    # the enrolling session is verified by the confirmation; a new device from it is allowed
    assert client.post("/api/v1/me/totp/", HTTP_X_CSRFTOKEN=csrf).status_code == 201
    TOTPDevice.objects.filter(user=user, confirmed=False).delete()
    # a session that signed in without the code (as an SSO session without MFA does) is refused
    session = client.session
    session.pop("otp_device_id", None)
    session.save()
    r = client.post("/api/v1/me/totp/", HTTP_X_CSRFTOKEN=csrf)
    assert (r.status_code, r.json()["code"]) == (403, "otp_required")
    assert list(TOTPDevice.objects.filter(user=user)) == [device]


def test_recovery_codes_are_shown_once_stored_hashed_and_work_once(dev):
    _org, _project, user = dev
    client, csrf = _sign_in(user.email)
    _device, codes = _enrol(client, csrf, user)
    assert len(codes) == 10 and len(set(codes)) == 10
    stored = set(RecoveryCode.objects.filter(device__user=user).values_list("digest", flat=True))
    assert stored == {digest(c) for c in codes} and not stored & set(codes)
    assert "recovery_codes" not in client.get("/api/v1/me/").json()

    # lost the phone: a recovery code signs in (as the second factor) and lets the user replace the device
    lost, csrf2 = _sign_in(user.email, otp_token=codes[0].upper())
    assert lost.get("/api/v1/session/").json()["two_factor_verified"] is True
    assert lost.delete("/api/v1/me/totp/", HTTP_X_CSRFTOKEN=csrf2).status_code == 204

    # a used code does not work again
    client, csrf = _sign_in(user.email)
    device, codes2 = _enrol(client, csrf, user)
    other = APIClient(enforce_csrf_checks=True)
    token = other.get("/api/v1/session/").json()["csrf_token"]
    r = other.post("/api/v1/session/", {"email": user.email, "password": PASSWORD, "otp_token": codes2[1]},
                   format="json", HTTP_X_CSRFTOKEN=token)
    assert r.status_code == 200
    other = APIClient(enforce_csrf_checks=True)
    token = other.get("/api/v1/session/").json()["csrf_token"]
    r = other.post("/api/v1/session/", {"email": user.email, "password": PASSWORD, "otp_token": codes2[1]},
                   format="json", HTTP_X_CSRFTOKEN=token)
    assert (r.status_code, r.json()["code"]) == (401, "invalid_otp")
    # the codes of the first enrolment were replaced
    r = other.post("/api/v1/session/", {"email": user.email, "password": PASSWORD, "otp_token": codes[2]},
                   format="json", HTTP_X_CSRFTOKEN=token)
    assert (r.status_code, r.json()["code"]) == (401, "invalid_otp")


def test_recovery_codes_can_be_regenerated_from_a_verified_session(dev):
    _org, _project, user = dev
    client, csrf = _sign_in(user.email)
    _device, codes = _enrol(client, csrf, user)
    r = client.post("/api/v1/me/totp/recovery-codes/", HTTP_X_CSRFTOKEN=csrf)
    assert r.status_code == 200 and len(r.json()["recovery_codes"]) == 10
    assert not set(r.json()["recovery_codes"]) & set(codes)
    assert RecoveryCode.objects.filter(digest=digest(codes[0])).count() == 0


def test_staff_reset_a_users_factor_with_an_audited_reason(dev):
    org, _project, user = dev
    client, csrf = _sign_in(user.email)
    _enrol(client, csrf, user)
    operator = make_user("op@provider.test", staff_role=StaffRole.OPERATOR)
    staff = client_for(token_for(operator, staff=True))
    r = staff.post(f"/api/v1/users/{user.pk}/reset-two-factor/", {}, format="json")
    assert (r.status_code, r.json()["code"]) == (400, "validation_error") and "reason" in r.json()["errors"]
    r = staff.post(f"/api/v1/users/{user.pk}/reset-two-factor/", {"reason": "ticket 4711: lost phone"},
                   format="json")
    assert r.status_code == 204
    assert not TOTPDevice.objects.filter(user=user).exists() and not RecoveryCode.objects.exists()
    event = AuditEvent.objects.get(action="totp.reset")
    assert (event.actor_id, event.target_id, event.organization_id) == (operator.pk, str(user.pk), org.pk)
    assert event.after == {"by": "staff", "reason": "ticket 4711: lost phone"}
    _sign_in(user.email)  # no code needed any more


def test_tenants_and_read_only_staff_cannot_reset_factors(dev):
    org, _project, user = dev
    client, csrf = _sign_in(user.email)
    _enrol(client, csrf, user)
    owner = make_user("owner@acme.test")
    member(owner, org, OrgRole.OWNER)
    r = client_for(token_for(owner, organization=org)).post(
        f"/api/v1/users/{user.pk}/reset-two-factor/", {"reason": "please"}, format="json")
    assert r.status_code == 403
    support = make_user("support@provider.test", staff_role=StaffRole.SUPPORT)
    r = client_for(token_for(support, staff=True)).post(
        f"/api/v1/users/{user.pk}/reset-two-factor/", {"reason": "please"}, format="json")
    assert r.status_code == 403
    assert TOTPDevice.objects.filter(user=user, confirmed=True).exists()


def test_staff_sessions_need_a_second_factor(db, settings):
    make_user("op@provider.test", staff_role=StaffRole.OPERATOR, password=PASSWORD)
    client, csrf = _sign_in("op@provider.test")
    r = client.get("/api/v1/regions/")
    assert (r.status_code, r.json()["code"]) == (403, "two_factor_required")
    assert client.get("/api/v1/session/").json()["second_factor_needed"] == "two_factor_required"
    user = client.get("/api/v1/me/").json()
    from apps.identity.models import User

    _enrol(client, csrf, User.objects.get(pk=user["id"]))
    assert client.get("/api/v1/regions/").status_code == 200

    settings.STAFF_REQUIRE_2FA = False
    make_user("op2@provider.test", staff_role=StaffRole.OPERATOR, password=PASSWORD)
    client, _csrf = _sign_in("op2@provider.test")
    assert client.get("/api/v1/regions/").status_code == 200


def test_the_factors_sub_routes_answer_only_post(dev):
    """DELETE is documented on /me/totp only: /me/totp/confirm and /me/totp/recovery-codes answer 405 to it and do
    not advertise it (they used to run the factor's removal)."""
    _org, _project, user = dev
    client, csrf = _sign_in(user.email)
    device, _codes = _enrol(client, csrf, user)
    for path in ("/api/v1/me/totp/confirm/", "/api/v1/me/totp/recovery-codes/"):
        assert "DELETE" not in client.options(path, HTTP_X_CSRFTOKEN=csrf)["Allow"]
        assert client.delete(path, HTTP_X_CSRFTOKEN=csrf).status_code == 405
    assert TOTPDevice.objects.filter(pk=device.pk, confirmed=True).exists()
