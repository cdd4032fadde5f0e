"""OIDC single sign-on with mozilla-django-oidc, off unless configured.

Environment (read by `oidc_settings`, called from settings.py):
  OIDC_RP_CLIENT_ID, OIDC_RP_CLIENT_SECRET         the client registered at the identity provider (required)
  OIDC_OP_AUTHORIZATION_ENDPOINT, OIDC_OP_TOKEN_ENDPOINT, OIDC_OP_USER_ENDPOINT, OIDC_OP_JWKS_ENDPOINT
  OIDC_RP_SIGN_ALGO                                RS256 (default)
  OIDC_RP_SCOPES                                   "openid email profile"
  OIDC_CREATE_USER                                 false: only users who exist (invited) may log in
Users are matched by verified e-mail (case-insensitive). Login starts at /oidc/authenticate/.
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
    )
    return True, values
