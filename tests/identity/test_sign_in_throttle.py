"""Password and code attempts are throttled per account and per source address (DRF throttling on the Redis
cache): 429 problem+json `throttled` with Retry-After, and the attempt is not evaluated."""
import uuid

import pytest
from rest_framework.test import APIClient

from apps.audit.models import AuditEvent
from tests.tenancy.helpers import make_user

PASSWORD = "a-long-password-42"


def _address() -> str:
    """A documentation address (RFC 5737) unique to this run, so counters of earlier runs never interfere."""
    n = uuid.uuid4().int
    return f"198.51.{n % 250}.{(n >> 8) % 250 + 1}"


def _attempt(address: str, email: str, password: str):
    client = APIClient(REMOTE_ADDR=address)
    return client.post("/api/v1/session/", {"email": email, "password": password}, format="json")


@pytest.fixture
def rates(settings):
    settings.SIGN_IN_THROTTLE_RATES = {"sign_in_account": "3/min", "sign_in_address": "5/min"}


def test_password_attempts_are_throttled_per_account(db, rates):
    email = f"dev-{uuid.uuid4().hex[:8]}@acme.test"
    make_user(email, password=PASSWORD)
    for _ in range(3):  # from three different addresses
        assert _attempt(_address(), email, "wrong-password-x").status_code == 401
    r = _attempt(_address(), email, PASSWORD)  # even the right password is not tried
    assert r.status_code == 429 and r["Content-Type"] == "application/problem+json"
    assert r.json()["code"] == "throttled" and 0 < int(r["Retry-After"]) <= 60
    assert AuditEvent.objects.filter(action="session.login").count() == 0
    # another account is not affected
    other = f"other-{uuid.uuid4().hex[:8]}@acme.test"
    make_user(other, password=PASSWORD)
    assert _attempt(_address(), other, PASSWORD).status_code == 200


def test_password_attempts_are_throttled_per_source_address(db, rates):
    address = _address()
    for i in range(5):  # five different accounts from one address
        assert _attempt(address, f"nobody{i}-{uuid.uuid4().hex[:6]}@acme.test", "wrong-password-x").status_code == 401
    r = _attempt(address, f"someone-{uuid.uuid4().hex[:6]}@acme.test", "wrong-password-x")
    assert (r.status_code, r.json()["code"]) == (429, "throttled") and int(r["Retry-After"]) > 0
    assert _attempt(_address(), f"someone-{uuid.uuid4().hex[:6]}@acme.test", "wrong-password-x").status_code == 401


def test_reading_the_session_is_not_throttled(db, rates):
    client = APIClient(REMOTE_ADDR=_address())
    assert all(client.get("/api/v1/session/").status_code == 200 for _ in range(8))


def test_code_attempts_are_throttled_per_account(db, rates):
    """Guessing the second factor of a signed-in (SSO) session is limited like passwords."""
    from django_otp.plugins.otp_totp.models import TOTPDevice

    email = f"dev-{uuid.uuid4().hex[:8]}@acme.test"
    user = make_user(email, password=PASSWORD)
    client = APIClient(REMOTE_ADDR=_address())
    client.force_login(user)  # a session that still has to verify its device
    TOTPDevice.objects.create(user=user, name="default", confirmed=True)
    codes = [r.status_code for r in (client.post("/api/v1/session/otp/", {"otp_token": "00000" + str(i)},
                                                 format="json") for i in range(4))]
    assert codes[:3] == [401, 401, 401] and codes[3] == 429
    assert AuditEvent.objects.filter(action="session.otp_failed", target_id=str(user.pk)).count() == 3
