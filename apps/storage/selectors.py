"""Tenant-scoped reads of storage objects. Every API queryset starts here (tenant scope: CONTRIBUTING.md)."""
from __future__ import annotations

from django.db.models import QuerySet, Sum

from apps.tenancy.selectors import is_staff, project_list_visible_to

from .models import Snapshot, Volume, VolumeAttachment, VolumeType
from .states import SnapshotStatus, VolumeStatus


def _authenticated(user) -> bool:
    return user is not None and getattr(user, "is_authenticated", False)


def volume_type_list_visible_to(user) -> QuerySet[VolumeType]:
    """Active volume types for any authenticated caller (the catalog is provider-wide); staff: all."""
    if not _authenticated(user):
        return VolumeType.objects.none()
    qs = VolumeType.objects.prefetch_related("zones")
    return qs if is_staff(user) else qs.filter(is_active=True)


def volume_list_visible_to(user) -> QuerySet[Volume]:
    """Volumes of the projects the user can see, deleted ones included (their status says so)."""
    return (Volume.objects.filter(project__in=project_list_visible_to(user))
            .select_related("project", "volume_type", "zone").prefetch_related("attachments"))


def snapshot_list_visible_to(user) -> QuerySet[Snapshot]:
    return Snapshot.objects.filter(project__in=project_list_visible_to(user)).select_related("project", "volume")


def attachments_of_instance(instance_id) -> QuerySet[VolumeAttachment]:
    """The attachments of one instance (every status), by device."""
    return VolumeAttachment.objects.filter(instance_id=instance_id).select_related("volume").order_by("device")


def _live(*, organization=None, project=None) -> QuerySet[Volume]:
    qs = Volume.objects.exclude(status=VolumeStatus.DELETED)
    return qs.filter(project=project) if project is not None else qs.filter(project__organization=organization)


def quota_usage(resource: str, *, organization=None, project=None, qualifier=None) -> int:
    """Usage counter for `apps.tenancy.quotas`: ``volumes`` (live volumes: every status but `deleted`, `error`
    included until it is deleted) and ``volume_gib`` (the sum of their `size_gib`; qualifier = volume type
    name) and ``snapshots`` (live snapshots: every status but `deleted`). An extend holds its new size from the
    request on."""
    if resource == "snapshots":
        snaps = Snapshot.objects.exclude(status=SnapshotStatus.DELETED)
        return (snaps.filter(project=project) if project is not None
                else snaps.filter(project__organization=organization)).count()
    qs = _live(organization=organization, project=project)
    if resource == "volumes":
        return qs.count()
    if qualifier:
        qs = qs.filter(volume_type__name=qualifier)
    return int(qs.aggregate(s=Sum("size_gib"))["s"] or 0)


def volume_type_names() -> set[str]:
    """Qualifiers of the ``volume_gib`` quota: every volume type's name."""
    return set(VolumeType.objects.values_list("name", flat=True))


def snapshots_live_of(volume) -> QuerySet[Snapshot]:
    return Snapshot.objects.filter(volume=volume).exclude(status=SnapshotStatus.DELETED)


def volume_sku(volume_type_name: str) -> str:
    """The billing SKU of a volume type's storage: ``volume:type=<name>`` (`apps.billing.skus`). Price it per GiB
    (`unit` ``month`` for a price per GiB-month, or ``hour``) in a price book."""
    from apps.billing.skus import sku_for

    return sku_for("volume", type=volume_type_name)


def volume_usage(period_start, period_end):
    """Billing usage source ``storage.volume``: every `VolumeUsage` interval overlapping `[period_start,
    period_end)` as an `apps.billing.registry.UsageInterval` of SKU `volume_sku(type)`, on demand, with `units` =
    the GiB held (so a price per GiB-month bills GiB-months); one run per volume (`run_key`)."""
    from decimal import Decimal

    from django.db.models import Q

    from apps.billing.registry import UsageInterval

    from .models import VolumeUsage

    rows = (VolumeUsage.objects.filter(start__lt=period_end).filter(Q(end__isnull=True) | Q(end__gt=period_start))
            .select_related("project"))
    for u in rows.order_by("start", "id"):
        yield UsageInterval(key=f"volume_usage:{u.pk}", organization_id=u.project.organization_id,
                            project_id=u.project_id, resource_type="storage.volume", resource_id=str(u.volume_id),
                            sku=volume_sku(u.volume_type_name), pricing_model="on_demand", start=u.start, end=u.end,
                            run_key=f"volume:{u.volume_id}", units=Decimal(u.size_gib))
