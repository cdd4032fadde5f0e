"""Invitations by e-mail: a signed, expiring link (django.core.signing) accepted once.

The token is `signing.dumps(<invitation id>, salt=SALT)`, i.e. HMAC-SHA256 keyed by SECRET_KEY with a
timestamp; it is accepted until `settings.INVITATION_MAX_AGE_SECONDS` (and the row's `expires_at`). Errors:
400 `invitation_invalid` (bad signature), 410 `invitation_expired` / `invitation_revoked`,
409 `invitation_already_used`, 403 `invitation_email_mismatch`, 409 `invitation_login_required`
(the e-mail belongs to an existing user who is not logged in).
"""
from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core import signing
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.mail import send_mail
from django.db import transaction

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.errors import Conflict, ValidationFailed

from .. import authz
from ..errors import Code, Forbidden, Gone
from ..models import Invitation, Membership, Organization, Project, ProjectRole
from .memberships import membership_add, validate_role

SALT = "gpucloud.invitation"


def invitation_token(invitation: Invitation) -> str:
    return signing.dumps(str(invitation.pk), salt=SALT)


def invitation_accept_url(token: str) -> str:
    return f"{settings.PUBLIC_URL.rstrip('/')}/invitations/accept?token={token}"


def invitation_create(*, actor, organization: Organization, email: str, role: str,
                      project: Project | None = None) -> Invitation:
    """Invite `email` with `role` (organization role, or project role when `project` is given) and e-mail the
    link after commit. Organization invitations: owner/admin (owner invitations: an owner; writing staff only the
    first owner of an organization without an active owner, onboarding: docs/adr/0104); project invitations: the
    project's admins too (an organization owner/admin is one). 409 `duplicate_membership` if the
    user is already a member, 409 `invitation_pending` if a pending invitation exists. The answer is the same
    whether or not the e-mail has an account (nothing reveals which e-mails are registered)."""
    validate_role(role, project=project)
    _authorize(actor, organization, project, role)
    if project is not None and project.organization_id != organization.pk:
        raise ValidationFailed("The project is not in this organization.", errors={"project": ["not found"]})
    email = get_user_model().objects.normalize_email(email.strip()).lower()
    with transaction.atomic():
        if Membership.objects.filter(organization=organization, project=project, user__email__iexact=email).exists():
            raise Conflict("This user is already a member.", code=Code.DUPLICATE_MEMBERSHIP)
        pending = Invitation.objects.filter(organization=organization, project=project, email__iexact=email,
                                            accepted_at__isnull=True, revoked_at__isnull=True,
                                            expires_at__gt=now())
        if pending.exists():
            raise Conflict("A pending invitation for this e-mail exists; revoke it first.",
                           code=Code.INVITATION_PENDING)
        invitation = Invitation.objects.create(
            organization=organization, project=project, email=email, role=role,
            invited_by=actor if getattr(actor, "pk", None) else None,
            expires_at=now() + dt.timedelta(seconds=settings.INVITATION_MAX_AGE_SECONDS))
        audit_record(actor=actor, action="invitation.create", target=invitation,
                     organization=organization, project=project,
                     after={"email": email, "role": role})
        token = invitation_token(invitation)
        transaction.on_commit(lambda: _send(invitation, token))
    return invitation


def _authorize(actor, organization: Organization, project: Project | None, role: str) -> None:
    if project is None:
        authz.authorize_org_invitation(actor, organization, role)
    else:
        authz.authorize_project(actor, project, (ProjectRole.ADMIN,))


def _send(invitation: Invitation, token: str) -> None:
    scope = invitation.organization.name + (f" / {invitation.project.name}" if invitation.project_id else "")
    send_mail(
        subject=f"You are invited to {scope} on gpucloud",
        message=(f"You have been invited to {scope} as {invitation.role}.\n\n"
                 f"Accept within {settings.INVITATION_MAX_AGE_SECONDS // 3600} hours:\n"
                 f"{invitation_accept_url(token)}\n\nAPI: POST /api/v1/invitations/accept "
                 f'{{"token": "{token}"}}\n'),
        from_email=settings.DEFAULT_FROM_EMAIL, recipient_list=[invitation.email])


def invitation_revoke(*, actor, invitation: Invitation) -> Invitation:
    """Revoke a pending invitation (owner/admin; a project's admins for its invitations). 409
    `invitation_already_used` if accepted. Staff who invited an organization's first owner may revoke that
    invitation while the organization has no active owner (a mistyped e-mail)."""
    _authorize(actor, invitation.organization, invitation.project, invitation.role)
    with transaction.atomic():
        locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
        if locked.accepted_at:
            raise Conflict("The invitation was already accepted.", code=Code.INVITATION_ALREADY_USED)
        if locked.revoked_at is None:
            locked.revoked_at = now()
            locked.save(update_fields=["revoked_at"])
            audit_record(actor=actor, action="invitation.revoke", target=locked,
                         organization=locked.organization, project=locked.project)
    return locked


def _load(token: str) -> Invitation:
    try:
        invitation_id = signing.loads(token, salt=SALT, max_age=settings.INVITATION_MAX_AGE_SECONDS)
    except signing.SignatureExpired:
        raise Gone("The invitation has expired.", code=Code.INVITATION_EXPIRED)
    except signing.BadSignature:
        raise ValidationFailed("The invitation link is not valid.", code=Code.INVITATION_INVALID)
    invitation = Invitation.objects.select_for_update().filter(pk=invitation_id).first()
    if invitation is None:
        raise ValidationFailed("The invitation link is not valid.", code=Code.INVITATION_INVALID)
    if invitation.accepted_at:
        raise Conflict("The invitation was already used.", code=Code.INVITATION_ALREADY_USED)
    if invitation.revoked_at:
        raise Gone("The invitation was revoked.", code=Code.INVITATION_REVOKED)
    if invitation.expires_at <= now():
        raise Gone("The invitation has expired.", code=Code.INVITATION_EXPIRED)
    return invitation


def invitation_preview(*, token: str) -> Invitation:
    """The pending invitation named by `token` (for the landing page), or the error accepting it would give."""
    with transaction.atomic():
        return _load(token)


def _user_for(actor, invitation: Invitation, password: str | None, full_name: str):
    User = get_user_model()
    if actor is not None and actor.is_authenticated:
        if actor.email.lower() != invitation.email.lower():
            raise Forbidden("This invitation was sent to another e-mail address.",
                            code=Code.INVITATION_EMAIL_MISMATCH)
        return actor
    if User.objects.filter(email__iexact=invitation.email).exists():
        raise Conflict("An account with this e-mail exists: log in, then accept.",
                       code="invitation_login_required")
    if not password:
        raise ValidationFailed("Choose a password for the new account.", errors={"password": ["required"]})
    try:
        validate_password(password)
    except DjangoValidationError as exc:
        raise ValidationFailed("The password is too weak.", errors={"password": exc.messages})
    return User.objects.create_user(invitation.email, password, full_name=full_name)


def invitation_accept(*, actor, token: str, password: str | None = None, full_name: str = "") -> Membership:
    """Accept the invitation in `token`: creates the account if needed (anonymous caller, new e-mail) and the
    membership, once. Joining an organization is the account holder's decision: a signed-in caller must use an
    interactive (console) session, never an API token (403 `interactive_session_required`), so a leaked token
    cannot join its user to an organization whose owners would then see the user's security events.
    Errors: see the module docstring."""
    if actor is not None and actor.is_authenticated:
        if getattr(actor, "api_token", None) is not None:
            raise Forbidden("Accepting an invitation needs a console sign-in, not an API token.",
                            code="interactive_session_required")
        authz.require_write_token(actor)
    with transaction.atomic():
        invitation = _load(token)
        user = _user_for(actor, invitation, password, full_name)
        role = invitation.role if invitation.project_id is None else ProjectRole(invitation.role)
        membership = membership_add(actor=user, organization=invitation.organization, user=user,
                                    project=invitation.project, role=role, action="invitation.accept")
        invitation.accepted_at = now()
        invitation.accepted_by = user
        invitation.save(update_fields=["accepted_at", "accepted_by"])
    return membership
