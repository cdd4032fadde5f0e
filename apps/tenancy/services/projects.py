"""Project writes. Creating a project is quota-checked (`projects` per organization)."""
from __future__ import annotations

from django.db import transaction
from django.db.models import ProtectedError

from apps.audit.services import audit_record
from apps.core.db import unique_conflict
from apps.core.errors import Conflict

from .. import authz
from ..errors import Code
from ..models import Organization, Project, ProjectRole
from ..quotas import quota_check
from ._common import fields_of

ORG_ADMINS = authz.ORG_ADMINS


def project_create(*, actor, organization: Organization, slug: str, name: str, description: str = "") -> Project:
    """Create a project in `organization` (owner/admin or staff). 422 `quota_exceeded` past the `projects`
    quota (checked under the organization row lock, so concurrent creates never exceed it); 409 `slug_taken`."""
    authz.authorize_org(actor, organization, ORG_ADMINS)
    with transaction.atomic():
        quota_check(scope=organization, resource="projects", requested=1)
        if Project.objects.filter(organization=organization, slug=slug).exists():
            raise Conflict(f"Project slug {slug!r} is taken in this organization.", code=Code.SLUG_TAKEN)
        with unique_conflict(f"Project slug {slug!r} is taken in this organization.", code=Code.SLUG_TAKEN):
            project = Project.objects.create(organization=organization, slug=slug, name=name,
                                             description=description)
        audit_record(actor=actor, action="project.create", target=project,
                     after=fields_of(project, ("slug", "name", "description")))
    return project


def project_update(*, actor, project: Project, **changes) -> Project:
    """Change `name` / `description` (project admin, organization owner/admin, or staff)."""
    changes = {k: v for k, v in changes.items() if k in ("name", "description")}
    authz.authorize_project(actor, project, (ProjectRole.ADMIN,))
    with transaction.atomic():
        locked = Project.objects.select_for_update().get(pk=project.pk)
        before = fields_of(locked, changes)
        for key, value in changes.items():
            setattr(locked, key, value)
        locked.save(update_fields=list(changes))
        audit_record(actor=actor, action="project.update", target=locked,
                     before=before, after=fields_of(locked, changes))
    return locked


def project_delete(*, actor, project: Project) -> None:
    """Delete an empty project (organization owner/admin or staff). 409 `project_not_empty` while any resource
    or operation still references it. Its memberships, quotas, invitations and tokens go with it."""
    authz.authorize_org(actor, project.organization, ORG_ADMINS)
    try:
        with transaction.atomic():
            audit_record(actor=actor, action="project.delete", target=project,
                         before=fields_of(project, ("slug", "name")))
            Project.objects.filter(pk=project.pk).delete()
    except ProtectedError:
        raise Conflict("The project still holds resources; delete them first.", code=Code.PROJECT_NOT_EMPTY)
