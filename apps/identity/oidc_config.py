"""OIDC single sign-on with mozilla-django-oidc, off unless configured.

Environment (read by `oidc_settings`, called from settings.py):
  OIDC_RP_CLIENT_ID, OIDC_RP_CLIENT_SECRET         the client registered at the identity provider (required)
  OIDC_OP_AUTHORIZATION_ENDPOINT, OIDC_OP_TOKEN_ENDPOINT, OIDC_OP_USER_ENDPOINT, OIDC_OP_JWKS_ENDPOINT
  OIDC_RP_SIGN_ALGO                                RS256 (default)
  OIDC_RP_SCOPES                                   "openid email profile"
  OIDC_CREATE_USER                                 false: only existing users and pending invitees sign in
  OIDC_LOGIN_REDIRECT_URL, OIDC_LOGOUT_REDIRECT_URL  where a sign-in / a POST /oidc/logout/ lands ("/")
  OIDC_MFA_AMR_VALUES                              `amr` values that assert MFA: "mfa mca otp hwk sc swk"
  OIDC_MFA_ACR_VALUES                              `acr` values that assert MFA (none by default)
Identities are linked by (iss, sub); a new one only from a verified e-mail, never to staff by e-mail
(apps.identity.signin.sso_resolve_user). Sign-in starts at /oidc/authenticate/; a refusal lands on
/sign-in/failed?reason=<code>.
"""
from __future__ import annotations


def oidc_settings(env) -> tuple[bool, dict]:
    """(enabled, settings) from the environment; enabled only when a client id is configured."""
    client_id = env.str("OIDC_RP_CLIENT_ID", default="")
    if not client_id:
        return False, {}
    keys = ("OIDC_OP_AUTHORIZATION_ENDPOINT", "OIDC_OP_TOKEN_ENDPOINT", "OIDC_OP_USER_ENDPOINT",
            "OIDC_OP_JWKS_ENDPOINT")
    values = {key: env.str(key, default="") for key in keys}
    values.update(
        OIDC_RP_CLIENT_ID=client_id,
        OIDC_RP_CLIENT_SECRET=env.str("OIDC_RP_CLIENT_SECRET", default=""),
        OIDC_RP_SIGN_ALGO=env.str("OIDC_RP_SIGN_ALGO", default="RS256"),
        OIDC_RP_SCOPES=env.str("OIDC_RP_SCOPES", default="openid email profile"),
        OIDC_CREATE_USER=env.bool("OIDC_CREATE_USER", default=False),
        LOGIN_REDIRECT_URL=env.str("OIDC_LOGIN_REDIRECT_URL", default="/"),
        LOGIN_REDIRECT_URL_FAILURE="/sign-in/failed",
        LOGOUT_REDIRECT_URL=env.str("OIDC_LOGOUT_REDIRECT_URL", default="/"),
        OIDC_CALLBACK_CLASS="apps.identity.oidc.CallbackView",
        OIDC_USE_PKCE=True,
    )
    return True, values
