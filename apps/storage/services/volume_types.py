"""Volume type writes (provider staff: operator). A type names the pool that holds its volumes
(docs/storage.md); changing the pool of a type that has volumes would strand them, so only the published
attributes change once volumes exist.

Errors: 400 `validation_error` (sizes), 409 `name_taken`, 409 `conflict` (pool change with volumes)."""
from __future__ import annotations

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.db import unique_conflict
from apps.core.errors import Conflict, ValidationFailed
from apps.tenancy.authz import authorize_staff

from ..errors import Code
from ..models import VolumeType

FIELDS = ("name", "description", "backend", "pool", "pool_kind", "pool_target_path", "pool_source", "iops_class",
          "throughput_class", "multi_attach", "host_local", "min_size_gib", "max_size_gib", "is_active")
POOL_FIELDS = ("backend", "pool", "pool_kind", "pool_target_path", "pool_source", "host_local")


def _check_sizes(min_gib: int, max_gib: int) -> None:
    if not 1 <= min_gib <= max_gib:
        raise ValidationFailed("min_size_gib must be at least 1 and at most max_size_gib.",
                               errors={"min_size_gib": ["1 <= min_size_gib <= max_size_gib"]})


def _record(volume_type: VolumeType) -> dict:
    return {**{f: getattr(volume_type, f) for f in FIELDS},
            "zones": sorted(z.name for z in volume_type.zones.all())}


def volume_type_create(*, actor, zones=(), **fields) -> VolumeType:
    """Create a volume type; `zones` are `inventory.Zone`s (none: every zone)."""
    authorize_staff(actor)
    fields = {k: v for k, v in fields.items() if k in FIELDS}
    _check_sizes(fields.get("min_size_gib", 1), fields.get("max_size_gib", 16384))
    with transaction.atomic():
        with unique_conflict(f"A volume type named {fields.get('name')!r} exists.", code=Code.NAME_TAKEN):
            volume_type = VolumeType.objects.create(**fields)
        volume_type.zones.set(zones)
        audit_record(actor=actor, action="storage.volume_type.create", target=volume_type,
                     after=_record(volume_type))
    return volume_type


def volume_type_update(*, actor, volume_type: VolumeType, zones=None, **fields) -> VolumeType:
    """Change a volume type. The pool fields (`POOL_FIELDS`) change only while it has no live volume (409)."""
    authorize_staff(actor)
    fields = {k: v for k, v in fields.items() if k in FIELDS}
    with transaction.atomic():
        locked = VolumeType.objects.select_for_update().get(pk=volume_type.pk)
        before = _record(locked)
        moved = [f for f in POOL_FIELDS if f in fields and fields[f] != getattr(locked, f)]
        if moved and locked.volumes.exclude(status="deleted").exists():
            raise Conflict(f"The volume type has volumes; {', '.join(moved)} cannot change.",
                           fields=moved)
        for key, value in fields.items():
            setattr(locked, key, value)
        _check_sizes(locked.min_size_gib, locked.max_size_gib)
        with unique_conflict(f"A volume type named {locked.name!r} exists.", code=Code.NAME_TAKEN):
            locked.save()
        if zones is not None:
            locked.zones.set(zones)
        audit_record(actor=actor, action="storage.volume_type.update", target=locked, before=before,
                     after=_record(locked))
    return locked
