"""OIDC authentication backend (mozilla-django-oidc); configuration in `apps.identity.oidc_config`."""
from __future__ import annotations

from mozilla_django_oidc.auth import OIDCAuthenticationBackend


class OIDCBackend(OIDCAuthenticationBackend):
    """Maps the provider's `email` claim to our user (e-mails are stored lower-case); only verified e-mails."""

    def verify_claims(self, claims) -> bool:
        return bool(claims.get("email")) and claims.get("email_verified", True) is not False \
            and super().verify_claims(claims)

    def filter_users_by_claims(self, claims):
        email = (claims.get("email") or "").strip().lower()
        if not email:
            return self.UserModel.objects.none()
        return self.UserModel.objects.filter(email__iexact=email, is_active=True, is_service_account=False)

    def create_user(self, claims):
        email = claims["email"].strip().lower()
        return self.UserModel.objects.create_user(email, full_name=claims.get("name", ""))
