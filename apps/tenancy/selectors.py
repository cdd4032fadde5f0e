"""Tenant-scoped reads. Every tenant-owned queryset starts from these.

Visibility rules (docs/tenancy.md; tenant scope: CONTRIBUTING.md):
- provider staff (`user.staff_role` non-empty) see everything;
- an organization member (any role) sees the organization and all its projects;
- a project member sees that project (and its organization, read-only);
- a request authenticated by an API token is narrowed to the token's binding: a project token sees only its
  project, an organization token only its organization (see `apps.identity.authentication`).

`user.api_token` is set by `BearerTokenAuthentication` for bearer requests (absent for sessions).
Membership rows are read once per user object and cached on it (`_gpc_memberships`).
"""
from __future__ import annotations

from django.db.models import Q, QuerySet

from .models import Invitation, Membership, Organization, OrgRole, Project, ProjectRole, Quota

ORG_ROLE_TO_PROJECT_ROLE = {
    OrgRole.OWNER: ProjectRole.ADMIN, OrgRole.ADMIN: ProjectRole.ADMIN, OrgRole.MEMBER: ProjectRole.MEMBER,
    OrgRole.BILLING: ProjectRole.VIEWER, OrgRole.VIEWER: ProjectRole.VIEWER,
}
PROJECT_ROLE_RANK = {ProjectRole.VIEWER: 1, ProjectRole.MEMBER: 2, ProjectRole.ADMIN: 3}


def _authenticated(user) -> bool:
    return user is not None and getattr(user, "is_authenticated", False)


def is_staff(user) -> bool:
    """True for provider staff (any staff role) acting with staff powers."""
    return _authenticated(user) and bool(getattr(user, "staff_role", ""))


def _token(user):
    return getattr(user, "api_token", None)


def _memberships(user) -> list[tuple]:
    """[(organization_id, project_id | None, role)] of `user`, cached on the instance."""
    cached = user.__dict__.get("_gpc_memberships")
    if cached is None:
        cached = list(Membership.objects.filter(user_id=user.pk).values_list("organization_id", "project_id", "role"))
        user.__dict__["_gpc_memberships"] = cached
    return cached


def forget_memberships(user) -> None:
    """Drop the cached memberships of `user` (after a service changed them)."""
    if user is not None:
        user.__dict__.pop("_gpc_memberships", None)


def _token_allows(user, organization_id, project_id=None) -> bool:
    token = _token(user)
    if token is None or token.is_staff_token:
        return True
    if token.project_id:
        return project_id is not None and token.project_id == project_id
    return token.organization_id == organization_id


def organization_ids_visible_to(user) -> set:
    """Ids of the organizations `user` is a member of (directly or through a project), narrowed by its token."""
    ids = {org for org, _project, _role in _memberships(user)}
    token = _token(user)
    if token is not None and not token.is_staff_token:
        ids &= {token.project.organization_id if token.project_id else token.organization_id}
    return ids


def organization_list_visible_to(user) -> QuerySet[Organization]:
    """Organizations `user` may see (staff: all)."""
    if not _authenticated(user):
        return Organization.objects.none()
    if is_staff(user):
        return Organization.objects.all()
    return Organization.objects.filter(id__in=organization_ids_visible_to(user))


def project_list_visible_to(user) -> QuerySet[Project]:
    """Projects `user` may see: staff see all; tenants see projects they are members of (directly or via org)."""
    if not _authenticated(user):
        return Project.objects.none()
    if is_staff(user):
        return Project.objects.all()
    rows = _memberships(user)
    org_ids = [org for org, project, _role in rows if project is None]
    project_ids = [project for _org, project, _role in rows if project is not None]
    if not org_ids and not project_ids:
        return Project.objects.none()
    qs = Project.objects.filter(Q(organization_id__in=org_ids) | Q(id__in=project_ids))
    token = _token(user)
    if token is not None and not token.is_staff_token:
        qs = qs.filter(id=token.project_id) if token.project_id else qs.filter(organization_id=token.organization_id)
    return qs


def org_role_of(user, organization) -> str | None:
    """The organization role (`OrgRole`) `user` holds in `organization`, or None.

    None also when the request's token is bound to a project (a project token never acts at organization level)
    or to another organization."""
    if not _authenticated(user):
        return None
    org_id = getattr(organization, "pk", organization)
    token = _token(user)
    if token is not None and not token.is_staff_token and (token.project_id or token.organization_id != org_id):
        return None
    return next((role for org, project, role in _memberships(user) if org == org_id and project is None), None)


def project_role_of(user, project) -> str | None:
    """The effective project role (`ProjectRole`) of `user` in `project`, or None.

    The higher of the project membership and the role implied by the organization membership
    (owner/admin → admin, member → member, billing/viewer → viewer), narrowed by the request's token."""
    if not _authenticated(user) or not _token_allows(user, project.organization_id, project.pk):
        return None
    best = None
    for org, proj, role in _memberships(user):
        if proj is None and org == project.organization_id:
            candidate = ORG_ROLE_TO_PROJECT_ROLE[role]
        elif proj == project.pk:
            candidate = role
        else:
            continue
        if best is None or PROJECT_ROLE_RANK[candidate] > PROJECT_ROLE_RANK[best]:
            best = candidate
    return best


def organization_has_active_owner(organization) -> bool:
    """Whether an active user holds the owner role of `organization` (not so right after staff created it)."""
    return Membership.objects.filter(organization=organization, project__isnull=True, role=OrgRole.OWNER,
                                     user__is_active=True).exists()


def membership_list_visible_to(user) -> QuerySet[Membership]:
    """Memberships of the organizations and projects `user` can see (organization-level rows only for
    organization members)."""
    qs = Membership.objects.select_related("user", "organization", "project")
    if not _authenticated(user):
        return qs.none()
    if is_staff(user):
        return qs
    org_ids = [org for org in organization_ids_visible_to(user) if org_role_of(user, org)]
    return qs.filter(Q(organization_id__in=org_ids) | Q(project__in=project_list_visible_to(user)))


def invitation_list_visible_to(user) -> QuerySet[Invitation]:
    """Invitations of the organizations where `user` is owner or admin, and of the projects it administers
    (staff: all)."""
    qs = Invitation.objects.select_related("organization", "project")
    if not _authenticated(user):
        return qs.none()
    if is_staff(user):
        return qs
    org_ids = [org for org in organization_ids_visible_to(user)
               if org_role_of(user, org) in (OrgRole.OWNER, OrgRole.ADMIN)]
    admin_projects = [p.pk for p in project_list_visible_to(user).only("id", "organization_id")
                      if project_role_of(user, p) == ProjectRole.ADMIN]
    return qs.filter(Q(organization_id__in=org_ids) | Q(project_id__in=admin_projects))


def quota_list_visible_to(user) -> QuerySet[Quota]:
    """The limits that apply to what `user` sees (staff: all): the organization-level limits of each organization
    it can see and the project-level limits of each project it can see. A project member, or a project-bound
    token, reads its organization's limits too (they bound its project; docs/tenancy.md, "Quotas"), but never
    another project's. Reading is not changing: `services.quota_authorize` decides that (403)."""
    qs = Quota.objects.select_related("organization", "project")
    if not _authenticated(user):
        return qs.none()
    if is_staff(user):
        return qs
    return qs.filter(Q(organization_id__in=organization_ids_visible_to(user), project__isnull=True)
                     | Q(project__in=project_list_visible_to(user)))
