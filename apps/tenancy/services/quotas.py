"""Quota writes. Organization-level limits are set by the provider's operators (staff role `operator`: a quota is
a commitment of the fleet's capacity; billing admins and support read them, docs/adr/1300); an organization's
owner/admin (or an operator) may set project-level limits inside it (to share the organization's quota between
projects)."""
from __future__ import annotations

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.errors import Conflict, ValidationFailed

from .. import authz
from ..errors import Code
from ..models import Organization, OrgRole, Project, Quota
from ..quotas import PROJECT_SCOPED, limit_of, split_resource, validate_resource


def _authorize(actor, organization: Organization, project: Project | None) -> None:
    if project is None:
        authz.authorize_staff(actor, authz.QUOTA_STAFF)
    else:
        authz.authorize_org(actor, organization, (OrgRole.OWNER, OrgRole.ADMIN), staff_roles=authz.QUOTA_STAFF)


def _check_within_organization(organization: Organization, project: Project | None, resource: str,
                               limit: int) -> None:
    """A project limit never exceeds its organization's (ADR 0103): the organization's limit for the same key and,
    for a qualified key, for its base key. 400 `quota_above_organization` naming both limits."""
    if project is None:
        return
    base, qualifier = split_resource(resource)
    for key in [resource] + ([base] if qualifier else []):
        org_limit = limit_of(organization=organization, resource=key)
        if org_limit is not None and limit > org_limit:
            raise ValidationFailed(
                f"A project limit of {limit} for {resource} is above the organization's limit of {org_limit} "
                f"for {key}.", code=Code.QUOTA_ABOVE_ORGANIZATION,
                errors={"limit": [f"at most {org_limit} (the organization's limit for {key})"]})


def quota_authorize(*, actor, quota: Quota) -> None:
    """403 unless `actor` may change `quota` (staff for an organization's limit, owner/admin for a project's)."""
    _authorize(actor, quota.organization, quota.project)


def quota_create(*, actor, organization: Organization, resource: str, limit: int,
                 project: Project | None = None) -> Quota:
    """Set a limit for `resource` at the scope. 400 `unknown_resource`; 409 `conflict` if one exists
    (change it with `quota_update`); 400 `quota_above_organization` for a project limit above the
    organization's."""
    base, _qualifier = validate_resource(resource)
    if project is not None and base not in PROJECT_SCOPED:
        raise ValidationFailed(f"{resource} is limited per organization only.", code=Code.UNKNOWN_RESOURCE,
                               errors={"resource": ["not a project-level resource"]})
    if project is not None and project.organization_id != organization.pk:
        raise ValidationFailed("The project is not in this organization.", errors={"project": ["not found"]})
    _authorize(actor, organization, project)
    with transaction.atomic():
        _check_within_organization(organization, project, resource, limit)
        if Quota.objects.filter(organization=organization, project=project, resource=resource).exists():
            raise Conflict(f"A quota for {resource} exists at this scope; change its limit.")
        quota = Quota.objects.create(organization=organization, project=project, resource=resource, limit=limit)
        audit_record(actor=actor, action="quota.create", target=quota,
                     organization=organization, project=project,
                     after={"resource": resource, "limit": limit})
    return quota


def quota_update(*, actor, quota: Quota, limit: int) -> Quota:
    """Change the limit. A limit below the current usage is allowed: it blocks new requests only.
    400 `quota_above_organization` for a project limit above the organization's."""
    _authorize(actor, quota.organization, quota.project)
    with transaction.atomic():
        locked = Quota.objects.select_for_update().get(pk=quota.pk)
        _check_within_organization(locked.organization, locked.project, locked.resource, limit)
        before = {"limit": locked.limit}
        locked.limit = limit
        locked.save(update_fields=["limit"])
        audit_record(actor=actor, action="quota.update", target=locked,
                     organization=locked.organization, project=locked.project,
                     before=before, after={"limit": limit, "resource": locked.resource})
    return locked


def quota_delete(*, actor, quota: Quota) -> None:
    """Remove the limit: a project falls back to the organization's limit, an organization to its plan default."""
    _authorize(actor, quota.organization, quota.project)
    with transaction.atomic():
        audit_record(actor=actor, action="quota.delete", target=quota,
                     organization=quota.organization, project=quota.project,
                     before={"resource": quota.resource, "limit": quota.limit})
        Quota.objects.filter(pk=quota.pk).delete()
