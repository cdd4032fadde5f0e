"""Authorization checks the tenancy and identity services run before writing.

`actor=None` is the system (management commands, demo loader): always allowed.
Order of checks: a read-scoped token → 403 `token_read_only`; provider staff whose role the check names in
`staff_roles` → allowed (provider-side changes only: an organization's quotas, its plan and billing fields; the
default names none); an object the actor cannot see → 404 `not_found` (never 403, so no existence leak); an
insufficient role → 403 `permission_denied`.

Staff status alone never writes inside a customer's organization (docs/adr/0104): staff act there by a
membership, as any member; staff with none get 403 `staff_not_member` (they see every organization, so a 403 leaks
nothing). The one exception is onboarding: writing staff invite the first owner of an organization that has no
active owner (`authorize_org_invitation`).
"""
from __future__ import annotations

from collections.abc import Collection

from apps.core.errors import NotFound
from apps.identity.models import StaffRole

from . import selectors
from .errors import Code, Forbidden
from .models import OrgRole, ProjectRole

# Staff who make the provider's changes (catalog, prices, organizations and their onboarding); never a write inside
# a customer's organization by staff status alone (docs/adr/0104).
STAFF_WRITERS = frozenset({StaffRole.OPERATOR, StaffRole.BILLING_ADMIN})
# Staff who change quotas: operators only (a quota commits the fleet's capacity; docs/adr/1300).
QUOTA_STAFF = frozenset({StaffRole.OPERATOR})
# Project roles that create and change a project's resources (instances, keys, networks, leases).
PROJECT_WRITERS = (ProjectRole.ADMIN, ProjectRole.MEMBER)
# Organization roles that invite, manage members and service accounts, create and delete projects.
ORG_ADMINS = (OrgRole.OWNER, OrgRole.ADMIN)


def _about(error: Forbidden, organization_id) -> Forbidden:
    """`error` marked with the organization it refuses an action in (the audit log files the refusal there)."""
    error.organization_id = organization_id
    return error


def require_write_token(actor) -> None:
    """403 `token_read_only` when the request carries a read-scoped API token."""
    token = getattr(actor, "api_token", None)
    if token is not None and token.scope != "write":
        raise Forbidden("This API token is read-only.", code=Code.TOKEN_READ_ONLY)


def _staff_allowed(actor, staff_roles: Collection[str]) -> bool:
    """Whether `actor` is provider staff with one of `staff_roles` (a provider-side change the check names)."""
    return selectors.is_staff(actor) and actor.staff_role in staff_roles


def _staff_refusal(staff_roles: Collection[str]) -> Forbidden:
    """403 for staff with no role in the organization: `permission_denied` where the check is a provider-side change
    another staff role makes (`staff_roles` names it), else `staff_not_member`. Audited unscoped, as every staff
    refusal (the staff audit log shows it, not the customer's)."""
    if staff_roles:
        return Forbidden("Your staff role does not make this change.", code=Code.PERMISSION_DENIED)
    return Forbidden("Provider staff change a customer's organization only through a membership in it.",
                     code=Code.STAFF_NOT_MEMBER)


def authorize_org(actor, organization, roles: Collection[str], *, staff_roles: Collection[str] = ()) -> None:
    """Allow a write on `organization` if the actor holds one of `roles` there (or one of `staff_roles`: only for
    the provider's side of the organization, e.g. its quotas)."""
    if actor is None:
        return
    require_write_token(actor)
    if _staff_allowed(actor, staff_roles):
        return
    role = selectors.org_role_of(actor, organization)
    if role is None and selectors.is_staff(actor):
        raise _staff_refusal(staff_roles)
    if organization.pk not in selectors.organization_ids_visible_to(actor):
        raise NotFound("Organization not found.")
    if role not in roles:
        raise _about(Forbidden("Your role in this organization does not allow this action.",
                               code=Code.PERMISSION_DENIED), organization.pk)


def authorize_project(actor, project, roles: Collection[str], *, staff_roles: Collection[str] = ()) -> None:
    """Allow a write on `project` if the actor's effective project role is one of `roles` (staff too: by their
    membership, never by staff status unless the check names their role in `staff_roles`)."""
    if actor is None:
        return
    require_write_token(actor)
    if _staff_allowed(actor, staff_roles):
        return
    role = selectors.project_role_of(actor, project)
    if role is None and selectors.is_staff(actor):
        raise _staff_refusal(staff_roles)
    if not selectors.project_list_visible_to(actor).filter(pk=project.pk).exists():
        raise NotFound("Project not found.")
    if role not in roles:
        raise _about(Forbidden("Your role in this project does not allow this action.", code=Code.PERMISSION_DENIED),
                     project.organization_id)


def authorize_staff(actor, staff_roles: Collection[str] = STAFF_WRITERS) -> None:
    """Only provider staff with one of `staff_roles` (tenants get 403; support, read-only, too)."""
    if actor is None:
        return
    require_write_token(actor)
    if not selectors.is_staff(actor):
        raise Forbidden("Only provider staff may do this.", code=Code.PERMISSION_DENIED)
    if actor.staff_role not in staff_roles:
        raise Forbidden("Your staff role is read-only for this action.", code=Code.PERMISSION_DENIED)


def owner_onboarding(actor, organization) -> bool:
    """Whether `actor` is writing staff and `organization` has no active owner: then the actor may invite its first
    owner and revoke that invitation (onboarding, the one write staff make inside an organization they are not a
    member of; docs/adr/0104). No token check: the caller's `authorize_*` or `require_write_token` does it."""
    return _staff_allowed(actor, STAFF_WRITERS) and not selectors.organization_has_active_owner(organization)


def authorize_org_invitation(actor, organization, role: str) -> None:
    """Allow inviting someone to `organization` with organization role `role`, or revoking such an invitation:
    its owners and admins; an owner only by an owner (403 `owner_required`); writing staff only the first owner of
    an organization without an active owner (else 403 `staff_not_member`, as for any staff write there)."""
    if actor is None:
        return
    if role == OrgRole.OWNER and owner_onboarding(actor, organization):
        require_write_token(actor)
        return
    authorize_org(actor, organization, ORG_ADMINS)
    if role == OrgRole.OWNER and selectors.org_role_of(actor, organization) != OrgRole.OWNER:
        raise _about(Forbidden("Only an owner can invite an owner.", code=Code.OWNER_REQUIRED), organization.pk)


def project_writable(actor, project) -> bool:
    """Whether `actor` may create and change resources in `project` it can see: what
    `authorize_project(actor, project, PROJECT_WRITERS)` allows, answered without raising, so a client (the console)
    can show a viewer's, a read-only token's or staff's without a membership write actions disabled."""
    token = getattr(actor, "api_token", None)
    if token is not None and token.scope != "write":
        return False
    return selectors.project_role_of(actor, project) in PROJECT_WRITERS


def organization_manageable(actor, organization) -> bool:
    """Whether `actor` may invite to `organization`, change and remove its members and revoke its invitations:
    what `authorize_org(actor, organization, ORG_ADMINS)` allows, answered without raising, so a client (the
    console) can show the member actions of a viewer, billing member, read-only token or staff without a membership
    disabled."""
    token = getattr(actor, "api_token", None)
    if token is not None and token.scope != "write":
        return False
    return selectors.org_role_of(actor, organization) in ORG_ADMINS


def project_members_manageable(actor, project) -> bool:
    """Whether `actor` may invite to `project`, change and remove its project memberships and revoke its
    invitations: what `authorize_project(actor, project, (ProjectRole.ADMIN,))` allows (the membership and
    invitation services' rule for a project), answered without raising. True for the project's admins (also an
    organization owner or admin, whose role implies project admin); staff by their membership only."""
    token = getattr(actor, "api_token", None)
    if token is not None and token.scope != "write":
        return False
    return selectors.project_role_of(actor, project) == ProjectRole.ADMIN


def quota_changeable(actor, quota) -> bool:
    """Whether `actor` may change or remove `quota`: what the quota services' rule allows (an operator; for a
    project's limit also the organization's owners and admins), answered without raising, so the console offers
    Change only to those the server would let."""
    token = getattr(actor, "api_token", None)
    if token is not None and token.scope != "write":
        return False
    if selectors.is_staff(actor):
        return actor.staff_role in QUOTA_STAFF
    return quota.project_id is not None and selectors.org_role_of(actor, quota.organization) in ORG_ADMINS
