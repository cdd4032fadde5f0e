"""Password and code attempts are throttled (DRF throttling on the Redis cache, ADR 0103): per account from one
address, per account from every address (only clients without the account's device cookie) and per address.
429 problem+json `throttled` with Retry-After, the attempt is not evaluated, and the refusal is audited once per
window. Someone who knows an e-mail cannot lock its owner out, and API-token requests spend no sign-in budget."""
import uuid

from rest_framework.test import APIClient

from apps.audit.models import AuditEvent
from apps.tenancy.models import OrgRole
from tests.tenancy.helpers import client_for, make_org, make_user, member, token_for

PASSWORD = "a-long-password-42"


def _address() -> str:
    """A documentation address (RFC 5737) unique to this run, so counters of earlier runs never interfere."""
    n = uuid.uuid4().int
    return f"198.51.{n % 250}.{(n >> 8) % 250 + 1}"


def _email(name: str = "dev") -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}@acme.test"


def _attempt(address_or_client, email: str, password: str):
    client = address_or_client if isinstance(address_or_client, APIClient) else APIClient(REMOTE_ADDR=address_or_client)
    return client.post("/api/v1/session/", {"email": email, "password": password}, format="json")


def _rates(settings, account_address="3/min", account="100/min", address="100/min"):
    settings.SIGN_IN_THROTTLE_RATES = {"sign_in_account_address": account_address, "sign_in_account": account,
                                       "sign_in_address": address}


def test_attempts_at_one_account_from_one_address_are_throttled(db, settings):
    _rates(settings)
    email = _email()
    make_user(email, password=PASSWORD)
    address = _address()
    for _ in range(3):
        assert _attempt(address, email, "wrong-password-x").status_code == 401
    r = _attempt(address, email, PASSWORD)  # even the right password is not tried
    assert r.status_code == 429 and r["Content-Type"] == "application/problem+json"
    assert r.json()["code"] == "throttled" and 0 < int(r["Retry-After"]) <= 60
    assert AuditEvent.objects.filter(action="session.login").count() == 0
    assert _attempt(_address(), email, PASSWORD).status_code == 200  # the owner elsewhere is not affected


def test_someone_who_knows_the_email_cannot_lock_its_owner_out(db, settings):
    """Guesses from many addresses hit the account-wide ceiling; the owner's own client (device cookie from an
    earlier sign-in) still signs in. A client the account never signed in from waits for the window."""
    _rates(settings, account_address="3/min", account="5/min")
    email = _email()
    make_user(email, password=PASSWORD)
    home = APIClient(REMOTE_ADDR=_address())
    assert _attempt(home, email, PASSWORD).status_code == 200
    assert home.delete("/api/v1/session/").status_code == 204
    codes = [_attempt(_address(), email, "wrong-password-x").status_code for _ in range(12)]
    assert codes[:4] == [401] * 4 and set(codes[5:]) == {429}
    r = _attempt(home, email, PASSWORD)
    assert r.status_code == 200 and r.json()["authenticated"] is True
    assert _attempt(_address(), email, PASSWORD).status_code == 429


def test_a_forged_or_other_accounts_device_cookie_does_not_lift_the_ceiling(db, settings):
    _rates(settings, account_address="3/min", account="2/min")
    victim, mine = _email("victim"), _email("mine")
    make_user(victim, password=PASSWORD)
    make_user(mine, password=PASSWORD)
    attacker = APIClient(REMOTE_ADDR=_address())
    assert _attempt(attacker, mine, PASSWORD).status_code == 200  # the attacker's own account: a real cookie
    for _ in range(2):
        assert _attempt(APIClient(REMOTE_ADDR=_address()), victim, "wrong-password-x").status_code == 401
    attacker.cookies["gpucloud_device"] = "forged"
    assert _attempt(attacker, victim, "wrong-password-x").status_code == 429
    del attacker.cookies["gpucloud_device"]
    assert _attempt(attacker, mine, PASSWORD).status_code == 200
    assert _attempt(attacker, victim, "wrong-password-x").status_code == 429


def test_password_attempts_are_throttled_per_source_address(db, settings):
    _rates(settings, account_address="100/min", address="5/min")
    address = _address()
    for i in range(5):  # five different accounts from one address
        assert _attempt(address, _email(f"nobody{i}"), "wrong-password-x").status_code == 401
    r = _attempt(address, _email("someone"), "wrong-password-x")
    assert (r.status_code, r.json()["code"]) == (429, "throttled") and int(r["Retry-After"]) > 0
    assert _attempt(_address(), _email("someone"), "wrong-password-x").status_code == 401


def test_reading_the_session_is_not_throttled(db, settings):
    _rates(settings, account_address="3/min", address="5/min")
    client = APIClient(REMOTE_ADDR=_address())
    assert all(client.get("/api/v1/session/").status_code == 200 for _ in range(8))


def test_code_attempts_are_throttled_per_account(db, settings):
    """Guessing the second factor of a signed-in (SSO) session is limited like passwords."""
    from django_otp.plugins.otp_totp.models import TOTPDevice

    _rates(settings)
    user = make_user(_email(), password=PASSWORD)
    client = APIClient(REMOTE_ADDR=_address())
    client.force_login(user)  # a session that still has to verify its device
    TOTPDevice.objects.create(user=user, name="default", confirmed=True)
    codes = [r.status_code for r in (client.post("/api/v1/session/otp/", {"otp_token": "00000" + str(i)},
                                                 format="json") for i in range(4))]
    assert codes[:3] == [401, 401, 401] and codes[3] == 429
    assert AuditEvent.objects.filter(action="session.otp_failed", target_id=str(user.pk)).count() == 3


def test_api_token_requests_spend_no_sign_in_budget(db, settings):
    """A leaked token hammering the factor endpoints is refused (403, audited) but cannot use up the owner's
    sign-in attempts."""
    _rates(settings, account_address="2/min", account="2/min", address="100/min")
    email = _email()
    user = make_user(email, password=PASSWORD)
    org = make_org(f"acme-{uuid.uuid4().hex[:6]}")
    member(user, org, OrgRole.MEMBER)
    address = _address()
    leaked = client_for(token_for(user, organization=org))
    leaked.defaults["REMOTE_ADDR"] = address
    for path in ("/api/v1/me/totp/", "/api/v1/me/totp/confirm/", "/api/v1/me/totp/recovery-codes/") * 2:
        r = leaked.post(path, {"otp_token": "123456"}, format="json")
        assert (r.status_code, r.json()["code"]) == (403, "interactive_session_required")
    assert _attempt(address, email, PASSWORD).status_code == 200


def test_throttled_attempts_are_audited_once_per_window(db, settings):
    _rates(settings, account_address="2/min", account="100/min", address="100/min")
    acme, beta = make_org(f"acme-{uuid.uuid4().hex[:6]}"), make_org(f"beta-{uuid.uuid4().hex[:6]}")
    email = _email()
    user = make_user(email, password=PASSWORD)
    member(user, acme, OrgRole.MEMBER)
    member(user, beta, OrgRole.MEMBER)
    owner = make_user(_email("owner"))
    member(owner, acme, OrgRole.OWNER)
    address = _address()
    codes = [_attempt(address, email, "wrong-password-x").status_code for _ in range(6)]
    assert codes == [401, 401, 429, 429, 429, 429]
    events = AuditEvent.objects.filter(action="session.throttled")
    assert sorted(e.organization_id for e in events) == sorted([acme.pk, beta.pk])
    assert {(e.target_id, e.source_ip, e.after["limit"], e.after["path"]) for e in events} == {
        (str(user.pk), address, "sign_in_account_address", "/api/v1/session/")}
    seen = client_for(token_for(owner, organization=acme, scope="read")).get(
        "/api/v1/audit-events/?action=session.throttled").json()["results"]
    assert len(seen) == 1 and seen[0]["after"] == {"limit": "sign_in_account_address", "path": "/api/v1/session/"}
    # an unknown e-mail: unscoped, naming the e-mail tried
    nobody = _email("nobody")
    assert [_attempt(address, nobody, "x-wrong-password").status_code for _ in range(4)] == [401, 401, 429, 429]
    unknown = AuditEvent.objects.get(action="session.throttled", organization__isnull=True)
    assert unknown.after == {"limit": "sign_in_account_address", "path": "/api/v1/session/", "email": nobody}
