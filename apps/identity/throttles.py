"""Throttles for password and second-factor attempts (DRF throttling on the Redis cache; ADR 0103).

Three sliding windows in the default cache for every `POST` to a sign-in endpoint (`/session`, `/session/otp`,
`/me/totp*`), keyed by SHA-256 digests, never the e-mail or address itself:

- `sign_in_account_address`: one account from one source address (every attempt counts; 10/min);
- `sign_in_account`: one account from every address together, a much higher ceiling (100/h) that binds only
  clients *without* this account's device cookie, so someone who knows an e-mail cannot lock its owner out
  (OWASP, "Slow Down Online Guessing Attacks with Device Cookies"); a successful password sign-in sets the
  cookie (`DEVICE_COOKIE`, signed, one year);
- `sign_in_address`: one source address, every account (30/min).

The account is the e-mail sent, else the session's user. A request authenticated by an API token that names no
e-mail is not a sign-in attempt (it is refused 403 `interactive_session_required` and audited) and counts against
nothing. Rates come from `SIGN_IN_THROTTLE_RATES` (`<count>/<s|min|h|d>`), read at each request. Over a limit:
429 problem+json `throttled` with `Retry-After` (seconds), nothing evaluated, and `session.throttled` audited
once per window and limit bucket (`limit`: the scope), in every organization of the account named.
"""
from __future__ import annotations

import hashlib

from django.conf import settings
from django.core import signing
from django.core.cache import cache
from rest_framework.throttling import SimpleRateThrottle

from apps.core.request_context import get_source_ip

DEVICE_COOKIE = "gpucloud_device"
DEVICE_COOKIE_SALT = "gpucloud.sign-in-device"
DEVICE_COOKIE_MAX_AGE = 365 * 24 * 3600


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def sign_in_account(request) -> str | None:
    """The lower-cased e-mail a sign-in request is about: the body's `email`, else the session's user; None for
    a request authenticated by an API token without an e-mail, or an anonymous one without it."""
    email = request.data.get("email") if hasattr(request.data, "get") else None
    if isinstance(email, str) and email.strip():
        return email.strip().lower()
    if getattr(request, "auth", None) is not None:
        return None
    user = getattr(request._request, "user", None)
    if user is not None and user.is_authenticated:
        return user.email.lower()
    return None


def device_cookie_value(email: str) -> str:
    """The signed device cookie for a client that signed in to `email` (holds a digest, not the e-mail)."""
    return signing.dumps(_digest(email.strip().lower()), salt=DEVICE_COOKIE_SALT)


def device_is_trusted(request, email: str) -> bool:
    """True when the request carries a valid device cookie of `email` (it signed in from this client before)."""
    raw = request.COOKIES.get(DEVICE_COOKIE, "")
    if not raw:
        return False
    try:
        return signing.loads(raw, salt=DEVICE_COOKIE_SALT, max_age=DEVICE_COOKIE_MAX_AGE) == _digest(email)
    except signing.BadSignature:
        return False


def _address(request, throttle) -> str:
    return get_source_ip() or throttle.get_ident(request) or "unknown"


class _SignInThrottle(SimpleRateThrottle):
    methods = frozenset({"POST"})  # what it counts (the schema declares 429 on these: apps.core.schema)

    def get_rate(self):
        return settings.SIGN_IN_THROTTLE_RATES[self.scope]

    def allow_request(self, request, view):
        if request.method not in self.methods:
            return True
        if getattr(request, "auth", None) is not None and sign_in_account(request) is None:
            return True  # an API token's request is no sign-in attempt
        if super().allow_request(request, view):
            return True
        self._record(request)
        return False

    def _key(self, ident: str) -> str:
        return self.cache_format % {"scope": self.scope, "ident": _digest(ident)}

    def _record(self, request) -> None:
        """Audit the refusal once per window of this bucket (`cache.add` succeeds for the first one only)."""
        if not cache.add(f"{self.key}:audited", 1, self.duration):
            return
        from .models import User
        from .signin import security_event

        email = sign_in_account(request)
        user = User.objects.filter(email__iexact=email).first() if email else None
        after = {"limit": self.scope, "path": request.path, **({"email": email} if user is None and email else {})}
        security_event("session.throttled", user, actor=user, after=after)


class SignInAccountAddressThrottle(_SignInThrottle):
    scope = "sign_in_account_address"

    def get_cache_key(self, request, view):
        email = sign_in_account(request)
        return self._key(f"{email}|{_address(request, self)}") if email else None


class SignInAccountThrottle(_SignInThrottle):
    scope = "sign_in_account"

    def get_cache_key(self, request, view):
        email = sign_in_account(request)
        if not email or device_is_trusted(request, email):
            return None
        return self._key(email)


class SignInAddressThrottle(_SignInThrottle):
    scope = "sign_in_address"

    def get_cache_key(self, request, view):
        return self._key(_address(request, self))


SIGN_IN_THROTTLES = [SignInAccountAddressThrottle, SignInAccountThrottle, SignInAddressThrottle]
