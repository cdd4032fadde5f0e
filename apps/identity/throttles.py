"""Throttles for password and second-factor attempts (DRF throttling on the Redis cache; ADR 0103).

Two counters for every `POST` to a sign-in endpoint (`/session`, `/session/otp`, `/me/totp/confirm`), each a
sliding window in the default cache: per account (the e-mail sent, or the signed-in user) and per source address
(`apps.core.request_context.get_source_ip`, the address the request id middleware bound). Rates come from
`SIGN_IN_THROTTLE_RATES` (`<count>/<s|min|h|d>`), read at each request. Over the limit: 429 problem+json
`throttled` with `Retry-After` (seconds), nothing else done.
"""
from __future__ import annotations

import hashlib

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

from apps.core.request_context import get_source_ip


class _SignInThrottle(SimpleRateThrottle):
    methods = frozenset({"POST"})  # what it counts (the schema declares 429 on these: apps.core.schema)

    def get_rate(self):
        return settings.SIGN_IN_THROTTLE_RATES[self.scope]

    def allow_request(self, request, view):
        if request.method not in self.methods:
            return True
        return super().allow_request(request, view)

    def _key(self, ident: str) -> str:
        return self.cache_format % {"scope": self.scope, "ident": hashlib.sha256(ident.encode()).hexdigest()}


class SignInAccountThrottle(_SignInThrottle):
    scope = "sign_in_account"

    def get_cache_key(self, request, view):
        email = request.data.get("email") if hasattr(request.data, "get") else None
        if isinstance(email, str) and email.strip():
            return self._key(email.strip().lower())
        user = getattr(request._request, "user", None)
        if user is not None and user.is_authenticated:
            return self._key(user.email.lower())
        return None


class SignInAddressThrottle(_SignInThrottle):
    scope = "sign_in_address"

    def get_cache_key(self, request, view):
        return self._key(get_source_ip() or self.get_ident(request) or "unknown")


SIGN_IN_THROTTLES = [SignInAccountThrottle, SignInAddressThrottle]
