"""Health reads. Tenants see an event only through the resources of theirs that held the GPU (or host) when it
was observed (`HealthEventImpact`), never the host, GPU serial or other tenants' resources; staff see all."""

from __future__ import annotations

from django.db.models import QuerySet

from apps.tenancy.selectors import project_list_visible_to

from .models import HealthEventImpact


def health_event_impact_list_visible_to(user) -> QuerySet[HealthEventImpact]:
    return HealthEventImpact.objects.filter(project__in=project_list_visible_to(user)).select_related("event")
