"""Membership writes: roles of users in organizations and projects.

Rules (docs/tenancy.md): organization roles owner/admin/billing/member/viewer, project roles admin/member/viewer;
one membership per user and scope (409 `duplicate_membership`); an unknown role is 400 `unknown_role`; only an
owner grants or removes the owner role (403 `owner_required`; provider staff only by a membership, except the
first owner's invitation of an organization without one: docs/adr/0104); an organization always keeps at least
one owner (409 `last_owner`, checked under the organization row lock).
"""
from __future__ import annotations

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.db import unique_conflict
from apps.core.errors import Conflict, ValidationFailed

from .. import authz, hooks, selectors
from ..errors import Code, Forbidden
from ..models import Membership, Organization, OrgRole, Project, ProjectRole

ORG_ADMINS = authz.ORG_ADMINS


def validate_role(role: str, *, project) -> None:
    allowed = ProjectRole.values if project is not None else OrgRole.values
    if role not in allowed:
        scope = "project" if project is not None else "organization"
        raise ValidationFailed(f"Unknown {scope} role {role!r}.", code=Code.UNKNOWN_ROLE,
                               errors={"role": [f"one of {', '.join(allowed)}"]})


def _authorize(actor, organization: Organization, project: Project | None, *roles_touched: str) -> None:
    if project is None:
        authz.authorize_org(actor, organization, ORG_ADMINS)
        if OrgRole.OWNER in roles_touched and actor is not None \
                and selectors.org_role_of(actor, organization) != OrgRole.OWNER:
            raise Forbidden("Only an owner can grant or remove the owner role.", code=Code.OWNER_REQUIRED)
    else:
        authz.authorize_project(actor, project, (ProjectRole.ADMIN,))


def _lock_and_check_owners(organization: Organization, leaving: Membership) -> None:
    """Lock the organization row, then refuse if `leaving` is its last owner."""
    list(Organization.objects.select_for_update().filter(pk=organization.pk).values_list("pk"))
    owners = Membership.objects.filter(organization=organization, project__isnull=True, role=OrgRole.OWNER)
    if leaving.project_id is None and leaving.role == OrgRole.OWNER and not owners.exclude(pk=leaving.pk).exists():
        raise Conflict("An organization must keep at least one owner.", code=Code.LAST_OWNER)


def membership_create(*, actor, organization: Organization, user_email: str, role: str,
                      project: Project | None = None):
    """Ask `user_email` to take `role` in `organization` or in `project` (which must belong to it): an
    invitation the user accepts (`invitation_create`), never a membership without their consent. Returns the
    Invitation. Known and unknown e-mails get the same answer, so no caller learns which e-mails have an account.
    400 `unknown_role`; 403 `owner_required`; 409 `duplicate_membership` / `invitation_pending`."""
    from .invitations import invitation_create

    validate_role(role, project=project)
    if project is None:
        authz.authorize_org_invitation(actor, organization, role)
    else:
        _authorize(actor, organization, project, role)
    if project is not None and project.organization_id != organization.pk:
        raise ValidationFailed("The project is not in this organization.", errors={"project": ["not found"]})
    return invitation_create(actor=actor, organization=organization, project=project, email=user_email, role=role)


def membership_add(*, actor, organization: Organization, user, role: str, project: Project | None = None,
                   action: str = "membership.create") -> Membership:
    """Insert the membership (no authorization: callers have checked it). 409 `duplicate_membership`."""
    validate_role(role, project=project)
    with transaction.atomic():
        exists = Membership.objects.filter(user=user, organization=organization, project=project).exists()
        if exists:
            raise Conflict("This user already has a membership here.", code=Code.DUPLICATE_MEMBERSHIP)
        with unique_conflict("This user already has a membership here.", code=Code.DUPLICATE_MEMBERSHIP):
            membership = Membership.objects.create(user=user, organization=organization, project=project,
                                                   role=role)
        audit_record(actor=actor, action=action, target=membership, organization=organization, project=project,
                     after={"user": user.email, "role": role})
    selectors.forget_memberships(user)
    return membership


def membership_update(*, actor, membership: Membership, role: str) -> Membership:
    """Change the role. 400 `unknown_role`; 409 `last_owner` when demoting the last owner."""
    validate_role(role, project=membership.project)
    _authorize(actor, membership.organization, membership.project, role, membership.role)
    with transaction.atomic():
        if role != OrgRole.OWNER:
            _lock_and_check_owners(membership.organization, membership)
        locked = Membership.objects.select_for_update().get(pk=membership.pk)
        before = {"role": locked.role}
        locked.role = role
        locked.save(update_fields=["role"])
        audit_record(actor=actor, action="membership.update", target=locked,
                     organization=locked.organization, project=locked.project,
                     before=before, after={"role": role, "user": locked.user.email})
    selectors.forget_memberships(locked.user)
    return locked


def membership_delete(*, actor, membership: Membership) -> None:
    """Remove a membership (admins; anyone may remove their own). 409 `last_owner` for the last owner.

    In the same transaction the user's API tokens bound to the organization or its projects that no remaining
    membership backs are revoked, with the tokens minted from them, each audited as `api_token.revoke`
    (`reason: membership_removed`; the `membership_removed` hook, registered by identity)."""
    is_self = actor is not None and getattr(actor, "pk", None) == membership.user_id
    if is_self:
        authz.require_write_token(actor)
    else:
        _authorize(actor, membership.organization, membership.project, membership.role)
    with transaction.atomic():
        _lock_and_check_owners(membership.organization, membership)
        audit_record(actor=actor, action="membership.delete", target=membership, organization=membership.organization,
                     project=membership.project, before={"role": membership.role, "user": membership.user.email})
        Membership.objects.filter(pk=membership.pk).delete()
        hooks.membership_removed(actor=actor, user=membership.user, organization=membership.organization)
    selectors.forget_memberships(membership.user)
