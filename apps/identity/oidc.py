"""Single sign-on with mozilla-django-oidc; configuration in `apps.identity.oidc_config`, rules in
`apps.identity.signin.sso_resolve_user` (link by `iss` + `sub`; only a verified e-mail links; never staff by
e-mail).

The backend resolves the account from the verified ID token (`iss`, `sub`, `amr`, `acr`) and the userinfo claims
(`email`, `email_verified`, `name`); the callback view marks the session (method `sso`, MFA asserted or not),
writes the audit events and sends a refused sign-in to `/sign-in/failed?reason=<code>` (a page that says why).
Signing out through `/oidc/logout/` is audited like the password sign-out (`LogoutView`). Routes:
`apps.identity.oidc_urls`.
"""
from __future__ import annotations

import logging
from urllib.parse import urlencode

import jwt
import requests
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.http import HttpResponseRedirect
from django.urls import reverse
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCLogoutView

from . import signin

log = logging.getLogger("gpucloud.identity.oidc")

_RESULT = "_gpucloud_sso_result"


class OIDCBackend(OIDCAuthenticationBackend):
    def get_or_create_user(self, access_token, id_token, payload):
        userinfo = self.get_userinfo(access_token, id_token, payload)
        if userinfo.get("sub") not in (None, payload.get("sub")):  # OpenID Connect Core 5.3.2
            return self._refuse("claims_invalid")
        claims = {**userinfo, **{k: payload[k] for k in ("iss", "sub", "amr", "acr") if k in payload}}
        try:
            user = signin.sso_resolve_user(claims=claims, current_user=_recent_session_user(self.request))
        except signin.SsoRefused as refused:
            return self._refuse(refused.code, refused.user)
        setattr(self.request, _RESULT, {"mfa": signin.sso_asserts_mfa(claims), "code": ""})
        return user

    def _refuse(self, code: str, user=None):
        setattr(self.request, _RESULT, {"code": code, "user": user})
        return None

    def verify_claims(self, claims) -> bool:  # decided by sso_resolve_user
        return True

    def retrieve_matching_jwk(self, token):
        """The provider's signing key for `token`. A token without `kid` is accepted when the JWKS holds exactly
        one key for its algorithm (OpenID Connect Core 10.1 requires `kid` only with several keys)."""
        header = jwt.get_unverified_header(token)
        if "kid" in header:
            return super().retrieve_matching_jwk(token)
        response = requests.get(self.OIDC_OP_JWKS_ENDPOINT, verify=self.get_settings("OIDC_VERIFY_SSL", True),
                                timeout=self.get_settings("OIDC_TIMEOUT", None),
                                proxies=self.get_settings("OIDC_PROXY", None))
        response.raise_for_status()
        keys = [key for key in response.json().get("keys", [])
                if key.get("alg", header.get("alg")) == header.get("alg") and key.get("use", "sig") == "sig"]
        if len(keys) != 1:
            raise SuspiciousOperation("The ID token names no key and the provider has several.")
        return jwt.PyJWK(keys[0])


def _recent_session_user(request):
    """The session's user when it signed in recently with its second factor (it may link a new identity)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    try:
        signin.require_recent_sign_in(user, signin.sign_in_state(request))
    except Exception:  # noqa: BLE001 - any refusal means: not a linking session
        return None
    return user


class CallbackView(OIDCAuthenticationCallbackView):
    """The provider's redirect back: sign in, or land on the failure page with the reason."""

    def get(self, request):
        if request.GET.get("error"):
            setattr(request, _RESULT, {"code": "provider_error"})
        try:
            return super().get(request)
        except (SuspiciousOperation, requests.RequestException, jwt.PyJWTError, ValueError, KeyError):
            log.warning("sso_callback_failed", exc_info=True)
            return self.login_failure()

    def login_success(self):
        result = getattr(self.request, _RESULT, None) or {}
        response = super().login_success()
        signin.sso_signed_in(request=self.request, user=self.user, mfa=bool(result.get("mfa")))
        return response

    def login_failure(self):
        result = getattr(self.request, _RESULT, None) or {}
        code = result.get("code") or ("account_disabled" if getattr(self, "user", None) else "sso_failed")
        signin.sso_failed(code=code, user=result.get("user"))
        log.info("sso_refused", extra={"reason": code})
        return HttpResponseRedirect(reverse("sign-in-failed") + "?" + urlencode({"reason": code}))


class LogoutView(OIDCLogoutView):
    """POST /oidc/logout/: sign out (and on to the provider's logout when `OIDC_OP_LOGOUT_URL_METHOD` is set),
    recorded as `session.logout` (`method`: how the session signed in) in the same transaction, like
    `DELETE /api/v1/session`."""

    def post(self, request):
        with transaction.atomic():
            signin.logout_recorded(request)
            return super().post(request)
