"""Authentication for the API.

- `BearerTokenAuthentication`: `Authorization: Bearer gpc_<prefix>_<secret>` (see `apps.identity.tokens`).
  401 `authentication_failed` for an unknown, malformed, expired or revoked token, a disabled user, or a staff
  token whose user lost its staff role. On success `request.user` is the token's user with `user.api_token` set
  (tenancy selectors narrow visibility to the token's project or organization) and, unless the token is a staff
  token, `staff_role` cleared in memory (a tenant token never carries staff powers); `request.auth` is the token; the
  token's prefix is bound to the request context (logs and audit events carry it).
  `last_used_at` is written at most once a minute per token.
- `SessionAuthentication`: DRF's (CSRF enforced) plus two-factor enforcement (`apps.identity.signin`): a session
  of a user with a TOTP device that was not verified with it (or by an SSO MFA assertion) gets 403
  `otp_required`; one of a user who must have a second factor (an organization with `require_2fa`, or staff
  with `STAFF_REQUIRE_2FA`) and has none gets 403 `two_factor_required`; except on views that set
  `allow_unverified_session = True` (`/me`, `/me/totp*`, `/session*`).
"""
from __future__ import annotations

import datetime as dt

from rest_framework import authentication, exceptions

from apps.core.clock import now
from apps.core.request_context import bind_api_token

from . import tokens
from .models import ApiToken

LAST_USED_RESOLUTION = dt.timedelta(seconds=60)


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != self.keyword.lower():
            return None
        token = verify(raw.strip())
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token.")
        user = token.user
        if not token.is_staff_token:
            user.staff_role = ""
        user.api_token = token
        bind_api_token(prefix=token.prefix, user_id=user.pk)
        return user, token

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


def verify(raw: str) -> ApiToken | None:
    """The usable ApiToken for `raw`, or None. Touches `last_used_at` (at most once a minute)."""
    prefix = tokens.parse_prefix(raw)
    if prefix is None:
        return None
    token = (ApiToken.objects.select_related("user", "project").filter(prefix=prefix).first())
    current = now()
    if token is None or not tokens.matches(raw, token.secret_hash) or not token.is_usable(current):
        return None
    if not token.user.is_active or (token.is_staff_token and not token.user.staff_role):
        return None
    if token.last_used_at is None or current - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=current)
        token.last_used_at = current
    return token


class SessionAuthentication(authentication.SessionAuthentication):
    def authenticate(self, request):
        result = super().authenticate(request)
        if result is None:
            return None
        user = result[0]
        view = (request.parser_context or {}).get("view")
        if getattr(view, "allow_unverified_session", False):
            return result
        from .signin import require_second_factor

        require_second_factor(user, request._request.session)
        return result
