"""Single sign-on end to end against a real OpenID Connect provider (oidc-provider-mock: Authlib on Werkzeug)
started on 127.0.0.1 by the test: the authorization-code flow with PKCE, ID-token signatures checked against the
provider's JWKS, userinfo fetched over HTTP. Covers sign-in, linking by (iss, sub), the unverified-e-mail and
staff takeovers refused (and the page that says why), MFA claims (`amr`) honoured, TOTP asked for otherwise, and a
pending invitee signing in and accepting."""
import datetime as dt
import threading
import uuid
from urllib.parse import unquote, urlparse

import environ
import oidc_provider_mock
import pytest
import requests
import werkzeug.serving
from django_otp.oath import totp
from django_otp.plugins.otp_totp.models import TOTPDevice
from rest_framework.test import APIClient

from apps.audit.models import AuditEvent
from apps.core.clock import now
from apps.identity.models import ExternalIdentity, StaffRole
from apps.identity.oidc_config import oidc_settings
from apps.tenancy.models import Invitation, Membership, OrgRole
from apps.tenancy.services.invitations import invitation_token
from tests.tenancy.helpers import make_org, make_user, member

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def provider():
    server = werkzeug.serving.make_server("127.0.0.1", 0, oidc_provider_mock.app(require_nonce=True), threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        yield base, requests.get(f"{base}/.well-known/openid-configuration", timeout=5).json()
    finally:
        server.shutdown()
        thread.join(5)


@pytest.fixture
def sso(provider, settings, monkeypatch):
    """Configure the relying party from the environment the way an operator does, and return a sign-in helper."""
    base, discovery = provider
    monkeypatch.setenv("OIDC_RP_CLIENT_ID", "gpucloud")
    monkeypatch.setenv("OIDC_RP_CLIENT_SECRET", "test-client-secret")
    monkeypatch.setenv("OIDC_OP_AUTHORIZATION_ENDPOINT", discovery["authorization_endpoint"])
    monkeypatch.setenv("OIDC_OP_TOKEN_ENDPOINT", discovery["token_endpoint"])
    monkeypatch.setenv("OIDC_OP_USER_ENDPOINT", discovery["userinfo_endpoint"])
    monkeypatch.setenv("OIDC_OP_JWKS_ENDPOINT", discovery["jwks_uri"])
    monkeypatch.setenv("OIDC_LOGIN_REDIRECT_URL", "/api/v1/session")
    enabled, values = oidc_settings(environ.Env())
    assert enabled and values["OIDC_CALLBACK_CLASS"] == "apps.identity.oidc.CallbackView"
    for key, value in values.items():
        setattr(settings, key, value)
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, "apps.identity.oidc.OIDCBackend"]
    settings.ROOT_URLCONF = "tests.identity.sso_urls"

    settings.OIDC_ENABLED = True

    def sign_in(client: APIClient, claims: dict, sub: str | None = None, start_url: str = "/oidc/authenticate/"):
        """Run the whole flow for subject `sub` with `claims`, from `start_url`; the response of our callback."""
        sub = sub or uuid.uuid4().hex
        assert requests.put(f"{base}/users/{sub}", json=claims, timeout=5).status_code == 204
        start = client.get(start_url)
        assert start.status_code == 302 and start["Location"].startswith(discovery["authorization_endpoint"])
        authorize = requests.post(start["Location"], data={"sub": sub}, allow_redirects=False, timeout=5)
        assert authorize.status_code == 302, authorize.text
        back = urlparse(authorize.headers["Location"])
        assert back.path == "/oidc/callback/"
        return client.get(f"{back.path}?{back.query}")

    sign_in.issuer = base
    return sign_in


def _failed(response) -> str:
    assert response.status_code == 302 and response["Location"].startswith("/sign-in/failed?reason=")
    return response["Location"].split("reason=", 1)[1]


def _code(device: TOTPDevice, offset: int = 0) -> str:
    return str(totp(device.bin_key, device.step, device.t0, device.digits, device.drift + offset)).zfill(device.digits)


def test_verified_email_signs_in_and_links_then_the_subject_decides(sso, db):
    org = make_org("acme")
    user = make_user("dev@acme.test")
    member(user, org, OrgRole.MEMBER)
    client = APIClient()
    sub = uuid.uuid4().hex
    r = sso(client, {"email": "Dev@acme.test", "email_verified": True, "name": "Dev"}, sub=sub)
    assert r.status_code == 302 and r["Location"] == "/api/v1/session"
    state = client.get("/api/v1/session/").json()
    assert (state["authenticated"], state["email"], state["sign_in_method"]) == (True, "dev@acme.test", "sso")
    assert client.get("/api/v1/projects/").status_code == 200
    link = ExternalIdentity.objects.get(user=user)
    assert (link.issuer, link.subject) == (sso.issuer, sub)
    assert set(AuditEvent.objects.filter(organization=org).values_list("action", flat=True)) == {
        "sso.link", "session.login"}

    # the provider now sends another, unverified e-mail for the same subject: still the same account
    again = APIClient()
    sso(again, {"email": "renamed@elsewhere.test", "email_verified": False}, sub=sub)
    assert again.get("/api/v1/session/").json()["email"] == "dev@acme.test"


@pytest.mark.parametrize("verified", [None, False, "false"])
def test_unverified_email_cannot_take_over_an_account(sso, db, verified):
    victim = make_user("victim@acme.test")
    claims = {"email": "victim@acme.test", **({} if verified is None else {"email_verified": verified})}
    client = APIClient()
    r = sso(client, claims)
    assert _failed(r) == "email_not_verified"
    assert client.get("/api/v1/session/").json()["authenticated"] is False
    assert not ExternalIdentity.objects.exists()
    page = client.get(r["Location"])
    assert page.status_code == 200 and b"did not confirm that you own this e-mail address" in page.content
    event = AuditEvent.objects.get(action="session.login_failed")
    assert (event.target_id, event.after) == (str(victim.pk), {"method": "sso", "reason": "email_not_verified"})


def test_staff_account_is_never_linked_by_email_but_can_link_itself(sso, db):
    password = "a-long-password-42"
    operator = make_user("op@provider.test", staff_role=StaffRole.OPERATOR, password=password)
    device = TOTPDevice.objects.create(user=operator, name="default", confirmed=True)
    r = sso(APIClient(), {"email": "op@provider.test", "email_verified": True, "amr": ["mfa"]})
    assert _failed(r) == "staff_link_refused"
    assert not ExternalIdentity.objects.exists()

    # signed in with password and code, the operator links its own identity
    client = APIClient()
    csrf = client.get("/api/v1/session/").json()["csrf_token"]
    assert client.post("/api/v1/session/", {"email": operator.email, "password": password,
                                            "otp_token": _code(device)},
                       HTTP_X_CSRFTOKEN=csrf).status_code == 200
    sub = uuid.uuid4().hex
    r = sso(client, {"email": "operator@corp-idp.test", "email_verified": True, "amr": ["pwd", "otp"]}, sub=sub)
    assert r.status_code == 302 and r["Location"] == "/api/v1/session"
    assert ExternalIdentity.objects.get(subject=sub).user == operator
    # from now on the operator signs in by SSO; the provider's MFA satisfies the staff second-factor rule
    fresh = APIClient()
    sso(fresh, {"email": "operator@corp-idp.test", "email_verified": True, "amr": ["pwd", "otp"]}, sub=sub)
    assert fresh.get("/api/v1/session/").json()["two_factor_verified"] is True
    assert fresh.get("/api/v1/regions/").status_code == 200


def test_mfa_claims_satisfy_require_2fa_and_their_absence_asks_for_the_code(sso, db):
    org = make_org("acme", require_2fa=True)
    user = make_user("dev@acme.test")
    member(user, org, OrgRole.MEMBER)
    sub = uuid.uuid4().hex
    mfa = APIClient()
    sso(mfa, {"email": "dev@acme.test", "email_verified": True, "amr": ["pwd", "hwk"]}, sub=sub)
    assert mfa.get("/api/v1/projects/").status_code == 200

    plain = APIClient()
    sso(plain, {"email": "dev@acme.test", "email_verified": True, "amr": ["pwd"]}, sub=sub)
    r = plain.get("/api/v1/projects/")
    assert (r.status_code, r.json()["code"]) == (403, "two_factor_required")

    # with a TOTP device the user is asked for the code, not sent to enrol a second device
    device = TOTPDevice.objects.create(user=user, name="default", confirmed=True)
    coded = APIClient(enforce_csrf_checks=True)
    sso(coded, {"email": "dev@acme.test", "email_verified": True}, sub=sub)
    state = coded.get("/api/v1/session/").json()
    assert state["second_factor_needed"] == "otp_required"
    r = coded.get("/api/v1/projects/")
    assert (r.status_code, r.json()["code"]) == (403, "otp_required")
    r = coded.post("/api/v1/me/totp/", HTTP_X_CSRFTOKEN=state["csrf_token"])
    assert (r.status_code, r.json()["code"]) == (403, "otp_required")
    r = coded.post("/api/v1/session/otp/", {"otp_token": _code(device)}, format="json",
                   HTTP_X_CSRFTOKEN=state["csrf_token"])
    assert r.status_code == 200 and r.json()["two_factor_verified"] is True
    assert coded.get("/api/v1/projects/").status_code == 200
    assert list(TOTPDevice.objects.filter(user=user)) == [device]


def test_pending_invitee_signs_in_by_sso_and_accepts(sso, db):
    org = make_org("acme")
    invitation = Invitation.objects.create(organization=org, email="new@acme.test", role=OrgRole.MEMBER,
                                           expires_at=now() + dt.timedelta(days=1))
    stranger = APIClient()
    assert _failed(sso(stranger, {"email": "stranger@acme.test", "email_verified": True})) == "no_account"
    assert b"Ask your organization" in stranger.get("/sign-in/failed?reason=no_account").content

    client = APIClient(enforce_csrf_checks=True)
    r = sso(client, {"email": "new@acme.test", "email_verified": True, "name": "New Person"})
    assert r.status_code == 302 and r["Location"] == "/api/v1/session"
    csrf = client.get("/api/v1/session/").json()["csrf_token"]
    r = client.post("/api/v1/invitations/accept/", {"token": invitation_token(invitation)}, format="json",
                    HTTP_X_CSRFTOKEN=csrf)
    assert r.status_code in (200, 201), r.json()
    assert Membership.objects.filter(user__email="new@acme.test", organization=org, role=OrgRole.MEMBER).exists()


def test_provider_refusal_lands_on_a_page_that_says_why(sso, db):
    client = APIClient()
    r = client.get("/oidc/callback/?error=access_denied&state=nope")
    assert _failed(r) == "provider_error"
    page = client.get(r["Location"])
    assert page.status_code == 200 and b"refused or cancelled" in page.content


def test_signing_out_through_the_oidc_logout_is_recorded(sso, db):
    org = make_org("acme")
    user = make_user("dev@acme.test")
    member(user, org, OrgRole.MEMBER)
    client = APIClient()
    sso(client, {"email": "dev@acme.test", "email_verified": True})
    assert client.get("/api/v1/session/").json()["authenticated"] is True
    r = client.post("/oidc/logout/")
    assert r.status_code == 302
    assert client.get("/api/v1/session/").json()["authenticated"] is False
    event = AuditEvent.objects.get(action="session.logout")
    assert (event.organization_id, event.actor_id, event.target_id, event.after) == (
        org.pk, user.pk, str(user.pk), {"method": "sso"})
    assert client.post("/oidc/logout/").status_code == 302  # signed out already: nothing more recorded
    assert AuditEvent.objects.filter(action="session.logout").count() == 1


def test_invitation_page_offers_sso_and_returns_to_the_invitation(sso, db):
    """The e-mailed link's page has a single sign-on button; the invitee without an account signs in by SSO,
    lands back on the invitation signed in, and accepts with the page's form."""
    import html
    import re

    org = make_org("acme")
    invitation = Invitation.objects.create(organization=org, email="new@acme.test", role=OrgRole.MEMBER,
                                           expires_at=now() + dt.timedelta(days=1))
    page_url = f"/invitations/accept?token={invitation_token(invitation)}"
    client = APIClient()
    page = client.get(page_url)
    assert page.status_code == 200
    href = html.unescape(re.search(r'<a href="([^"]+)" id="sso-sign-in">', page.content.decode()).group(1))
    assert href.startswith("/oidc/authenticate/?next=")
    r = sso(client, {"email": "new@acme.test", "email_verified": True, "name": "New Person"}, start_url=href)
    assert r.status_code == 302 and unquote(r["Location"]) == page_url
    back = client.get(r["Location"])
    assert b"Signed in as new@acme.test" in back.content and b'id="sso-sign-in"' not in back.content
    r = client.post("/invitations/accept", {"token": invitation_token(invitation)}, format="multipart")
    assert r.status_code == 201, r.content.decode()
    assert b"You joined Acme" in r.content
    assert Membership.objects.filter(user__email="new@acme.test", organization=org, role=OrgRole.MEMBER).exists()


def test_invitation_page_has_no_sso_button_without_oidc(db):
    org = make_org("acme")
    invitation = Invitation.objects.create(organization=org, email="new@acme.test", role=OrgRole.MEMBER,
                                           expires_at=now() + dt.timedelta(days=1))
    page = APIClient().get(f"/invitations/accept?token={invitation_token(invitation)}")
    assert page.status_code == 200 and b"single sign-on" not in page.content
