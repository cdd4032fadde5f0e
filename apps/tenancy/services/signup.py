"""Self sign-up with e-mail verification, behind `settings.SIGNUP_ENABLED` (off by default).

1. `signup_request(email)` e-mails a signed link (django.core.signing, salt `gpucloud.signup`, valid
   `SIGNUP_MAX_AGE_SECONDS`, default 1 day). It answers the same whether or not the e-mail has an account.
2. `signup_complete(token, password, ...)` creates the user, a `trial`-plan organization owned by it and a first
   project. Errors: 404 `not_found` when sign-up is off, 400 `signup_invalid`, 410 `signup_expired`,
   409 `signup_already_used` (the e-mail has an account), 409 `slug_taken`.
"""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core import signing
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.mail import send_mail
from django.db import transaction

from apps.audit.services import audit_record
from apps.core.errors import Conflict, NotFound, ValidationFailed

from .. import quotas
from ..errors import Gone
from ..models import Membership, Organization, OrgRole, Project, Quota

SALT = "gpucloud.signup"


def _max_age() -> int:
    return getattr(settings, "SIGNUP_MAX_AGE_SECONDS", 24 * 3600)


def _require_enabled() -> None:
    if not getattr(settings, "SIGNUP_ENABLED", False):
        raise NotFound("Not found.")


def signup_request(*, email: str) -> None:
    """E-mail a verification link to `email` (after commit)."""
    _require_enabled()
    email = get_user_model().objects.normalize_email(email.strip()).lower()
    token = signing.dumps(email, salt=SALT)
    exists = get_user_model().objects.filter(email__iexact=email).exists()
    body = ("An account with this e-mail already exists; log in instead.\n" if exists else
            f"Confirm your e-mail to create your gpucloud account:\n"
            f"{settings.PUBLIC_URL.rstrip('/')}/signup/verify?token={token}\n\n"
            f'API: POST /api/v1/signup/verify {{"token": "{token}", "password": ..., "organization_slug": ...}}\n')
    transaction.on_commit(lambda: send_mail("Your gpucloud sign-up", body, settings.DEFAULT_FROM_EMAIL, [email]))


def signup_complete(*, token: str, password: str, organization_slug: str, organization_name: str = "",
                    full_name: str = ""):
    """Create the verified user, its trial organization (owner) and a `default` project. Returns the membership."""
    _require_enabled()
    try:
        email = signing.loads(token, salt=SALT, max_age=_max_age())
    except signing.SignatureExpired:
        raise Gone("The sign-up link has expired.", code="signup_expired")
    except signing.BadSignature:
        raise ValidationFailed("The sign-up link is not valid.", code="signup_invalid")
    try:
        validate_password(password)
    except DjangoValidationError as exc:
        raise ValidationFailed("The password is too weak.", errors={"password": exc.messages})
    User = get_user_model()
    with transaction.atomic():
        if User.objects.filter(email__iexact=email).exists():
            raise Conflict("This e-mail already has an account.", code="signup_already_used")
        if Organization.objects.filter(slug=organization_slug).exists():
            raise Conflict(f"Organization slug {organization_slug!r} is taken.", code="slug_taken")
        user = User.objects.create_user(email, password, full_name=full_name)
        org = Organization.objects.create(slug=organization_slug, name=organization_name or organization_slug,
                                          billing_email=email, plan="trial")
        Quota.objects.bulk_create([Quota(organization=org, resource=r, limit=v)
                                   for r, v in quotas.PLANS["trial"].items()])
        membership = Membership.objects.create(user=user, organization=org, role=OrgRole.OWNER)
        project = Project.objects.create(organization=org, slug="default", name="Default")
        audit_record(actor=user, action="organization.signup", target=org,
                     after={"slug": org.slug, "owner": email, "plan": "trial"})
        audit_record(actor=user, action="project.create", target=project, after={"slug": "default"})
    return membership
