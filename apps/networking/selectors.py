"""Tenant-scoped reads of networking objects, and the quota usage counters (vpcs, public_ips, ib_partitions).

Every queryset is narrowed to the projects `apps.tenancy.selectors.project_list_visible_to(user)` returns, so
another tenant's object is a 404 in the API. Staff see everything.
"""
from __future__ import annotations

from django.db.models import Count, F, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from apps.inventory.models import HcaPort, VirtualFunction
from apps.tenancy import selectors as tenancy

from .models import (
    IbPartition,
    PkeyPool,
    Port,
    PublicIp,
    PublicIpPool,
    SecurityGroup,
    SecurityGroupRule,
    Subnet,
    VirtualGuidPool,
    Vpc,
)
from .states import PublicIpKind


def _scoped(qs: QuerySet, user) -> QuerySet:
    if tenancy.is_staff(user):
        return qs
    return qs.filter(project__in=tenancy.project_list_visible_to(user))


def vpc_list_visible_to(user) -> QuerySet[Vpc]:
    return _scoped(Vpc.objects.select_related("project"), user)


def subnet_list_visible_to(user) -> QuerySet[Subnet]:
    return _scoped(Subnet.objects.select_related("vpc", "project"), user)


def security_group_list_visible_to(user) -> QuerySet[SecurityGroup]:
    return _scoped(SecurityGroup.objects.select_related("vpc", "project").prefetch_related("rules"), user)


def security_group_rule_list_visible_to(user) -> QuerySet[SecurityGroupRule]:
    return _scoped(SecurityGroupRule.objects.select_related("security_group"), user)


def port_list_visible_to(user) -> QuerySet[Port]:
    return _scoped(Port.objects.select_related("subnet", "vpc", "project")
                   .prefetch_related("fixed_ips", "security_groups"), user)


def public_ip_list_visible_to(user) -> QuerySet[PublicIp]:
    return _scoped(PublicIp.objects.select_related("pool", "vpc", "port"), user)


def ib_partition_list_visible_to(user) -> QuerySet[IbPartition]:
    return _scoped(IbPartition.objects.select_related("fabric", "project").prefetch_related("members"), user)


def public_ip_pool_list_visible_to(user) -> QuerySet[PublicIpPool]:
    """Pools are provider objects; every authenticated user may read their names (to choose one)."""
    if not getattr(user, "is_authenticated", False):
        return PublicIpPool.objects.none()
    return PublicIpPool.objects.all()


def pkey_pool_list_visible_to(user) -> QuerySet[PkeyPool]:
    """P_Key pools are staff-only."""
    if not tenancy.is_staff(user):
        return PkeyPool.objects.none()
    return PkeyPool.objects.select_related("fabric")


def virtual_guid_pool_list_visible_to(user) -> QuerySet[VirtualGuidPool]:
    """Virtual GUID pools are staff-only."""
    if not tenancy.is_staff(user):
        return VirtualGuidPool.objects.none()
    return VirtualGuidPool.objects.select_related("hca_port").prefetch_related("guids")


def hca_ports_guid_room(*, fabric_id, host_ids) -> QuerySet:
    """The HCA ports of `host_ids` cabled to fabric `fabric_id`, each annotated with ``guid_free``: how many
    virtual GUIDs its pool can still hand out (`services.virtual_guid_allocate` takes the lowest free offset;
    GUIDs still `releasing` hold theirs), or None when the port has no pool; and ``vf_free``: how many of its
    SR-IOV VFs in inventory (with a PCI address) no GUID of its pool can be on, i.e. the VFs less the pool's GUIDs
    still taken (each VM on a VF holds one GUID of the VF's port; a GUID still `releasing` counts, so this never
    offers a VF that is held). Ordered by host, device, port. Internal (compute's placement filter and VF
    choice); not tenant-scoped."""
    vfs = (VirtualFunction.objects.filter(hca_port=OuterRef("pk")).exclude(pci_address="").order_by()
           .values("hca_port").annotate(n=Count("pk")).values("n"))
    return (HcaPort.objects.filter(fabric_id=fabric_id, host_id__in=list(host_ids))
            .annotate(guid_taken=Count("virtual_guid_pool__guids"),
                      vf_count=Coalesce(Subquery(vfs, output_field=IntegerField()), Value(0)))
            .annotate(guid_free=F("virtual_guid_pool__size") - F("guid_taken"),
                      vf_free=F("vf_count") - F("guid_taken"))
            .order_by("host_id", "device", "port_number"))


# Quota usage counters (apps.tenancy.quotas): count what is really held.
def _count(model, extra: dict | None = None):
    def counter(*, organization, project, qualifier) -> int:
        qs = model.objects.filter(**(extra or {}))
        qs = qs.filter(project_id=project.pk) if project is not None else qs.filter(
            project__organization_id=organization.pk)
        return qs.count()
    return counter


def quota_counters() -> dict:
    """Tenancy quota counters by resource key: ``vpcs``, ``public_ips`` (floating only), ``ib_partitions``."""
    return {"vpcs": _count(Vpc), "public_ips": _count(PublicIp, {"kind": PublicIpKind.FLOATING}),
            "ib_partitions": _count(IbPartition)}


def public_ip_usage(period_start, period_end):
    """Billing usage source `networking.public_ip`: every floating-IP holding that overlaps
    `[period_start, period_end)`, as `apps.billing.registry.UsageInterval` (SKU `public_ip`, on demand)."""
    from django.db.models import Q

    from apps.billing.registry import UsageInterval
    from apps.billing.skus import sku_for

    from .models import PublicIpHolding

    sku = sku_for("public_ip")
    rows = (PublicIpHolding.objects.filter(start__lt=period_end)
            .filter(Q(end__isnull=True) | Q(end__gt=period_start)).select_related("project"))
    for h in rows.order_by("start"):
        yield UsageInterval(key=f"public_ip:{h.pk}", organization_id=h.project.organization_id,
                            project_id=h.project_id, resource_type="networking.public_ip",
                            resource_id=str(h.public_ip_id), sku=sku, pricing_model="on_demand", start=h.start,
                            end=h.end)
