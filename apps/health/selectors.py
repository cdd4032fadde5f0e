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


def maintenance_by_instance(instance_ids) -> dict:
    """Compute's maintenance provider: for each instance, its open remediation, else a `held` one while the
    instance still sits on the host it names (one query). ``{id: {remediation, status, consent_mode,
    deadline_at, reason}}``."""
    from apps.compute.models import Instance

    from .models import Remediation
    from .states import OPEN_REMEDIATION, RemediationStatus

    hosts = dict(Instance.objects.filter(pk__in=instance_ids).values_list("pk", "host_id"))
    out: dict = {}
    rows = Remediation.objects.filter(
        resource_id__in=instance_ids, status__in=[*OPEN_REMEDIATION, RemediationStatus.HELD]
    ).order_by("created_at")
    for rem in rows:
        if rem.status == RemediationStatus.HELD and hosts.get(rem.resource_id) != rem.from_host_id:
            continue
        if rem.resource_id in out and out[rem.resource_id]["status"] in OPEN_REMEDIATION:
            continue
        out[rem.resource_id] = {
            "remediation": rem.pk,
            "status": rem.status,
            "consent_mode": rem.consent_mode,
            "deadline_at": rem.deadline_at,
            "reason": rem.reason,
        }
    return out
