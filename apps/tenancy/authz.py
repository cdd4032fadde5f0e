"""Authorization checks the tenancy and identity services run before writing.

`actor=None` is the system (management commands, demo loader): always allowed.
Order of checks: a read-scoped token → 403 `token_read_only`; provider staff with a writing staff role → allowed
(support is read-only → 403); an object the actor cannot see → 404 `not_found` (never 403, so no existence leak);
an insufficient role → 403 `permission_denied`.
"""
from __future__ import annotations

from collections.abc import Collection

from apps.core.errors import NotFound
from apps.identity.models import StaffRole

from . import selectors
from .errors import Code, Forbidden
from .models import OrgRole, ProjectRole

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


def _staff_decision(actor, staff_roles: Collection[str]) -> bool | None:
    """True: allowed as staff; raises for read-only staff; None: not staff, continue with tenant rules."""
    if not selectors.is_staff(actor):
        return None
    if actor.staff_role in staff_roles:
        return True
    raise Forbidden("Your staff role is read-only for this action.", code=Code.PERMISSION_DENIED)


def authorize_org(actor, organization, roles: Collection[str], *,
                  staff_roles: Collection[str] = STAFF_WRITERS) -> None:
    """Allow a write on `organization` if the actor holds one of `roles` there (or a writing staff role)."""
    if actor is None:
        return
    require_write_token(actor)
    if _staff_decision(actor, staff_roles):
        return
    if organization.pk not in selectors.organization_ids_visible_to(actor):
        raise NotFound("Organization not found.")
    if selectors.org_role_of(actor, organization) not in roles:
        raise _about(Forbidden("Your role in this organization does not allow this action.",
                               code=Code.PERMISSION_DENIED), organization.pk)


def authorize_project(actor, project, roles: Collection[str], *,
                      staff_roles: Collection[str] = STAFF_WRITERS) -> None:
    """Allow a write on `project` if the actor's effective project role is one of `roles`."""
    if actor is None:
        return
    require_write_token(actor)
    if _staff_decision(actor, staff_roles):
        return
    if not selectors.project_list_visible_to(actor).filter(pk=project.pk).exists():
        raise NotFound("Project not found.")
    if selectors.project_role_of(actor, project) not in roles:
        raise _about(Forbidden("Your role in this project does not allow this action.", code=Code.PERMISSION_DENIED),
                     project.organization_id)


def authorize_staff(actor, staff_roles: Collection[str] = STAFF_WRITERS) -> None:
    """Only provider staff with one of `staff_roles` (tenants get 403)."""
    if actor is None:
        return
    require_write_token(actor)
    if not _staff_decision(actor, staff_roles):
        raise Forbidden("Only provider staff may do this.", code=Code.PERMISSION_DENIED)


def project_writable(actor, project) -> bool:
    """Whether `actor` may create and change resources in `project` it can see: what
    `authorize_project(actor, project, PROJECT_WRITERS)` allows, answered without raising, so a client (the console)
    can show a viewer's, a read-only token's or read-only staff's write actions disabled."""
    token = getattr(actor, "api_token", None)
    if token is not None and token.scope != "write":
        return False
    if selectors.is_staff(actor):
        return actor.staff_role in STAFF_WRITERS
    return selectors.project_role_of(actor, project) in PROJECT_WRITERS


def organization_manageable(actor, organization) -> bool:
    """Whether `actor` may invite to `organization`, change and remove its members and revoke its invitations:
    what `authorize_org(actor, organization, ORG_ADMINS)` allows, answered without raising, so a client (the
    console) can show the member actions of a viewer, billing member, read-only token or read-only staff disabled."""
    token = getattr(actor, "api_token", None)
    if token is not None and token.scope != "write":
        return False
    if selectors.is_staff(actor):
        return actor.staff_role in STAFF_WRITERS
    return selectors.org_role_of(actor, organization) in ORG_ADMINS


def project_members_manageable(actor, project) -> bool:
    """Whether `actor` may invite to `project`, change and remove its project memberships and revoke its
    invitations: what `authorize_project(actor, project, (ProjectRole.ADMIN,))` allows (the membership and
    invitation services' rule for a project), answered without raising. True for the project's admins (also an
    organization owner or admin, whose role implies project admin) and writing staff."""
    token = getattr(actor, "api_token", None)
    if token is not None and token.scope != "write":
        return False
    if selectors.is_staff(actor):
        return actor.staff_role in STAFF_WRITERS
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
