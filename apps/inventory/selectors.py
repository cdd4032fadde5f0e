"""Inventory reads. The fleet is provider-internal: only provider staff see hosts, devices and serials. Regions
and zones are the public catalog a tenant launches into: every authenticated caller reads them."""
from __future__ import annotations

from collections.abc import Callable

from django.db.models import Count, Max, QuerySet, Sum

from .models import (
    AgentCommand,
    Fabric,
    Gpu,
    HcaPort,
    Host,
    Incident,
    Rack,
    Region,
    ScalableUnit,
    Switch,
    Zone,
)


def _is_staff(actor) -> bool:
    return bool(getattr(actor, "is_authenticated", False) and getattr(actor, "staff_role", ""))


def _staff_only(actor, qs: QuerySet) -> QuerySet:
    return qs if _is_staff(actor) else qs.none()


def _authenticated(actor, qs: QuerySet) -> QuerySet:
    return qs if getattr(actor, "is_authenticated", False) else qs.none()


def region_list_visible_to(actor) -> QuerySet:
    """Every region, for any authenticated caller (tenants choose where to launch)."""
    return _authenticated(actor, Region.objects.all())


def zone_list_visible_to(actor) -> QuerySet:
    """Every zone, for any authenticated caller (tenants choose where to launch)."""
    return _authenticated(actor, Zone.objects.select_related("region"))


def scalable_unit_list_visible_to(actor) -> QuerySet:
    return _staff_only(actor, ScalableUnit.objects.select_related("zone"))


def rack_list_visible_to(actor) -> QuerySet:
    return _staff_only(actor, Rack.objects.select_related("zone", "scalable_unit"))


def fabric_list_visible_to(actor) -> QuerySet:
    return _staff_only(actor, Fabric.objects.select_related("region").prefetch_related("subnet_managers"))


def switch_list_visible_to(actor) -> QuerySet:
    return _staff_only(actor, Switch.objects.select_related("fabric", "zone", "scalable_unit", "rack"))


def host_list_visible_to(actor) -> QuerySet:
    return _staff_only(actor, Host.objects.select_related("zone", "scalable_unit", "rack"))


def gpu_list_visible_to(actor) -> QuerySet:
    return _staff_only(actor, Gpu.objects.select_related("host").prefetch_related("gpu_instances"))


def hca_port_list_visible_to(actor) -> QuerySet:
    return _staff_only(actor, HcaPort.objects.select_related("host", "fabric", "leaf_switch"))


def incident_list_visible_to(actor) -> QuerySet:
    return _staff_only(actor, Incident.objects.select_related("host", "gpu"))


def agent_command_list_visible_to(actor) -> QuerySet:
    return _staff_only(actor, AgentCommand.objects.select_related("host", "gpu"))


def gpus_per_host_max(model: str) -> int:
    """GPUs of `model` on the fullest host of the fleet (0 when no host has one); a whole-host lease of that
    model takes this many GPUs per host."""
    top = Gpu.objects.filter(model=model).values("host_id").annotate(n=Count("id")).aggregate(m=Max("n"))["m"]
    return int(top or 0)


def gpus_in_fleet(model: str, *, zone: str = "", mode: str = "") -> int:
    """GPUs of `model` on hosts that are not retired (in `zone` when given; in `mode`, e.g. ``exclusive``, when
    given): the most any request of that model (in that mode) could ever get."""
    qs = Gpu.objects.filter(model=model).exclude(host__state="retired")
    if mode:
        qs = qs.filter(mode=mode)
    return qs.filter(host__zone__name=zone).count() if zone else qs.count()


def fleet_capacity() -> Callable[[str, str | None], int | None]:
    """What the fleet could ever place of a tenancy quota resource, counting every host that is not retired, read
    in two queries: returns ``capacity(resource, qualifier)`` giving ``gpus`` (GPUs, of the model for
    ``gpus:<model>``), ``vcpus`` (CPU threads of hypervisor hosts), ``memory_mib``; None for resources it does
    not count."""
    hosts = Host.objects.exclude(state="retired")
    per_model = dict(Gpu.objects.filter(host__in=hosts).values("model").annotate(n=Count("id"))
                     .values_list("model", "n"))
    totals = hosts.filter(provisioning_kind="hypervisor").aggregate(vcpus=Sum("cpu_threads"),
                                                                    memory_mib=Sum("memory_mib"))

    def capacity(resource: str, qualifier: str | None) -> int | None:
        if resource == "gpus":
            return per_model.get(qualifier, 0) if qualifier else sum(per_model.values())
        if resource in ("vcpus", "memory_mib") and qualifier is None:
            return int(totals[resource] or 0)
        return None
    return capacity
