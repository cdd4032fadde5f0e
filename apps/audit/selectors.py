"""Tenant-scoped reads of audit events.

Staff see every event. A tenant sees the events of the organizations it belongs to (organization-level
membership: any role) and of the projects it can see; never another organization's."""
from __future__ import annotations

from django.db.models import Q, QuerySet

from .models import AuditEvent


def audit_event_list_visible_to(user) -> QuerySet[AuditEvent]:
    from apps.tenancy.selectors import (
        is_staff,
        org_role_of,
        organization_ids_visible_to,
        project_list_visible_to,
    )

    qs = AuditEvent.objects.all()
    if user is None or not user.is_authenticated:
        return qs.none()
    if is_staff(user):
        return qs
    org_ids = [org for org in organization_ids_visible_to(user) if org_role_of(user, org)]
    project_ids = list(project_list_visible_to(user).values_list("id", flat=True))
    return qs.filter(Q(organization_id__in=org_ids) | Q(project_id__in=project_ids))
