"""The server-rendered invitation page applies the API's two-factor gate: a session that the API refuses with
403 `two_factor_required` / `otp_required` could accept an invitation through `POST /invitations/accept` (and
join another organization) although `POST /api/v1/invitations/accept/` refused it."""
import pytest
from django.core import mail
from django_otp.plugins.otp_totp.models import TOTPDevice
from rest_framework.test import APIClient

from apps.tenancy.models import Membership, OrgRole

from .helpers import make_org, make_user, member, org_owner_client

pytestmark = pytest.mark.django_db
PASSWORD = "a-long-password-42"


def _invite(email: str, django_capture_on_commit_callbacks):
    org, _owner, owner_client = org_owner_client("other", "owner@other.test")
    with django_capture_on_commit_callbacks(execute=True):
        r = owner_client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": email,
                                                       "role": "member"})
    assert r.status_code == 201, r.content
    return org, mail.outbox[-1].body.split("?token=")[1].split()[0]


def _signed_in_by_password(email: str) -> tuple[APIClient, str]:
    client = APIClient(enforce_csrf_checks=True)
    csrf = client.get("/api/v1/session/").json()["csrf_token"]
    r = client.post("/api/v1/session/", {"email": email, "password": PASSWORD}, format="json",
                    HTTP_X_CSRFTOKEN=csrf)
    assert r.status_code == 200, r.content
    return client, r.json()["csrf_token"]


def test_a_member_of_a_2fa_organization_without_totp_cannot_accept_on_the_page(django_capture_on_commit_callbacks):
    strict = make_org("strict", require_2fa=True)
    user = make_user("dev@strict.test", password=PASSWORD)
    member(user, strict, OrgRole.MEMBER)
    other, token = _invite(user.email, django_capture_on_commit_callbacks)
    client, csrf = _signed_in_by_password(user.email)
    r = client.post("/api/v1/invitations/accept/", {"token": token}, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert (r.status_code, r.json()["code"]) == (403, "two_factor_required")

    page = client.post("/invitations/accept", {"token": token, "csrfmiddlewaretoken": csrf}, format="multipart")
    html = page.content.decode()
    assert page.status_code == 403, html
    assert "two_factor_required" in html and 'id="finish-second-factor"' in html and 'href="/sign-in"' in html
    assert not Membership.objects.filter(user=user, organization=other).exists()


def test_a_session_that_still_needs_its_code_cannot_accept_on_the_page(django_capture_on_commit_callbacks):
    user = make_user("sso@else.test", password=PASSWORD)
    TOTPDevice.objects.create(user=user, name="phone", confirmed=True)
    other, token = _invite(user.email, django_capture_on_commit_callbacks)
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)  # like an SSO sign-in of a user with a device: the session awaits its code
    csrf = client.get("/api/v1/session/").json()["csrf_token"]
    r = client.post("/api/v1/invitations/accept/", {"token": token}, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert (r.status_code, r.json()["code"]) == (403, "otp_required")

    page = client.post("/invitations/accept", {"token": token, "csrfmiddlewaretoken": csrf}, format="multipart")
    html = page.content.decode()
    assert page.status_code == 403, html
    assert "otp_required" in html and "authenticator app" in html and 'href="/sign-in"' in html
    assert not Membership.objects.filter(user=user, organization=other).exists()
