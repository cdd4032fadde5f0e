"""Health reads. Tenants see an event only through the resources of theirs that held the GPU (or host) when it
was observed (`HealthEventImpact`), never the host, GPU serial or other tenants' resources; staff see all."""

from __future__ import annotations

from django.db.models import QuerySet

from apps.tenancy.selectors import project_list_visible_to

from .models import HealthEventImpact


def health_event_impact_list_visible_to(user) -> QuerySet[HealthEventImpact]:
    return HealthEventImpact.objects.filter(project__in=project_list_visible_to(user)).select_related("event")


def remediation_list_visible_to(user) -> QuerySet:
    """Remediations of the caller's projects (staff: all); another tenant's are never returned (404)."""
    from .models import Remediation

    return Remediation.objects.filter(project__in=project_list_visible_to(user)).select_related(
        "event", "operation"
    )


def component_incident_list() -> QuerySet:
    """Every breaker incident (staff only: hosts and switches are the provider's)."""
    from .models import ComponentIncident

    return ComponentIncident.objects.select_related("switch")
