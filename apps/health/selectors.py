"""Health reads. Tenants see an event only through the resources of theirs that held the GPU (or host) when it
was observed (`HealthEventImpact`), never the host, GPU serial or other tenants' resources; staff see all."""

from __future__ import annotations

from django.db.models import QuerySet

from apps.tenancy.selectors import project_list_visible_to

from .models import HealthEventImpact


def health_event_impact_list_visible_to(user) -> QuerySet[HealthEventImpact]:
    return HealthEventImpact.objects.filter(project__in=project_list_visible_to(user)).select_related("event")


def health_event_list() -> QuerySet:
    """Every health event (staff only: hosts, GPUs and ports are the provider's), newest observed first, with its
    host, GPU and port joined and `impact_count` (the tenant resources it touched) annotated: one query a page."""
    from django.db.models import Count

    from .models import HealthEvent

    return HealthEvent.objects.select_related("host", "gpu", "hca_port").annotate(impact_count=Count("impacts"))


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


def repair_list() -> QuerySet:
    """Every repair and acceptance, newest first (staff only)."""
    from .models import Repair

    return Repair.objects.select_related("host", "gpu")


def rma_list() -> QuerySet:
    """Every RMA record, newest first (staff only)."""
    from .models import Rma

    return Rma.objects.select_related("host", "gpu")


def fence_list() -> QuerySet:
    """Every host fence (ADR 0218), newest first (staff only)."""
    from .models import HostFence

    return HostFence.objects.select_related("host", "event", "confirmed_by")


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


def host_workloads(host) -> dict:
    """Staff read (the admin portal's host panel): what runs on `host` now and the VMs health moves off it.

    ``{"workloads": [...], "remediations": [...]}``. A workload is an instance (or cluster member) whose host is
    `host` and is not deleted, or a lease holding capacity on it: ``{kind (instance | cluster_member | lease), id,
    name, status, organization {id, slug, name}, project {id, slug, name}, gpus (GPU indexes it holds now, sorted)}``,
    instances first, by organization and name. A remediation is one of the last 20 opened off `host`, newest first:
    ``{id, instance, name, organization {...}, status, consent_mode, deadline_at, reason, to_host (name or null),
    created_at, finished_at}``. A constant number of queries."""
    from django.db.models import Q

    from apps.compute.models import Instance
    from apps.compute.states import InstanceStatus
    from apps.core import clock
    from apps.inventory.models import Host
    from apps.reservations.models import Lease
    from apps.scheduling.selectors import allocation_list_at

    from .models import Remediation

    at = clock.now()
    held: dict = {}
    kinds: dict = {}
    for consumer_id, kind, index in allocation_list_at(host_id=host.pk, at=at).values_list(
            "consumer_id", "consumer_type", "gpu__index"):
        kinds.setdefault(consumer_id, kind)
        if index is not None:
            held.setdefault(consumer_id, set()).add(index)

    def org(p) -> dict:
        o = p.organization
        return {"id": o.pk, "slug": o.slug, "name": o.name}

    def proj(p) -> dict:
        return {"id": p.pk, "slug": p.slug, "name": p.name}

    instances = Instance.objects.filter(
        Q(host_id=host.pk) | Q(pk__in=[c for c, k in kinds.items() if k != "lease"])
    ).exclude(status=InstanceStatus.DELETED).select_related("project__organization")
    rows = [{"kind": "cluster_member" if i.cluster_id else "instance", "id": i.pk, "name": i.name,
             "status": i.status, "organization": org(i.project), "project": proj(i.project),
             "gpus": sorted(held.get(i.pk, ()))} for i in instances]
    leases = Lease.objects.filter(pk__in=[c for c, k in kinds.items() if k == "lease"]).select_related(
        "project__organization")
    rows.sort(key=lambda r: (r["organization"]["name"], r["name"]))
    rows += sorted(({"kind": "lease", "id": x.pk, "name": x.name, "status": x.status, "organization": org(x.project),
                     "project": proj(x.project), "gpus": sorted(held.get(x.pk, ()))} for x in leases),
                   key=lambda r: (r["organization"]["name"], r["name"]))

    rems = list(Remediation.objects.filter(from_host_id=host.pk).select_related("project__organization")
                .order_by("-created_at")[:20])
    names = dict(Instance.objects.filter(pk__in=[r.resource_id for r in rems]).values_list("pk", "name"))
    to_hosts = dict(Host.objects.filter(pk__in={r.to_host_id for r in rems if r.to_host_id}).values_list("pk", "name"))
    return {"workloads": rows, "remediations": [{
        "id": r.pk, "instance": r.resource_id, "name": names.get(r.resource_id, ""), "organization": org(r.project),
        "status": r.status, "consent_mode": r.consent_mode, "deadline_at": r.deadline_at, "reason": r.reason,
        "to_host": to_hosts.get(r.to_host_id), "created_at": r.created_at, "finished_at": r.finished_at}
        for r in rems]}
