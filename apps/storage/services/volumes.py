"""Volume writes: create (empty, from a snapshot, from an image), rename, extend, delete. Each validates,
applies a transition and starts an Operation (`apps.storage.workflows` does the backend work); every write is
audited in its transaction.

Errors: 400 `validation_error` (name, size outside the type's range, a source and a type that do not go
together), "Not found." naming `source_snapshot` (another project's snapshot); 400 `zone_not_served`,
`host_local_needs_instance`; 400 `size_must_grow` (an extend that does not grow: volumes never shrink);
409 `invalid_state` (with `allowed_states`; also deleting a volume with any attachment, naming `instances`), `name_taken`,
`instance_not_placed`; 422 `quota_exceeded` (``volumes``, ``volume_gib`` and
``volume_gib:<type>``), nothing written.
"""
from __future__ import annotations

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.db import atomic_with_retry, unique_conflict
from apps.core.errors import Conflict, InvalidState, ValidationFailed
from apps.core.references import reference_not_found
from apps.core.transitions import transition
from apps.operations.models import Operation
from apps.operations.runner import operation_start
from apps.tenancy.authz import authorize_project
from apps.tenancy.quotas import quota_check

from ..errors import Code
from ..models import Snapshot, Volume, VolumeType
from ..states import LIVE_STATUSES, VOLUME_TRANSITIONS, SnapshotStatus, VolumeStatus
from ._common import VOLUME_TARGET, WRITERS, validate_name
from .usage import usage_close

CREATE, EXTEND, DELETE = "volume.create", "volume.extend", "volume.delete"


def _size(volume_type: VolumeType, size_gib: int, floor: int = 0) -> int:
    low = max(volume_type.min_size_gib, floor)
    if not isinstance(size_gib, int) or not low <= size_gib <= volume_type.max_size_gib:
        raise ValidationFailed(f"size_gib must be {low}..{volume_type.max_size_gib} GiB for this volume.",
                               errors={"size_gib": [f"{low}..{volume_type.max_size_gib}"]})
    return size_gib


def _placement(volume_type: VolumeType, zone, instance, project) -> tuple:
    """(zone, host) of a new volume: a host-local type's volume is on `instance`'s host (required); a zone
    named must serve the type; without one, the type's first zone by name (None when it names none)."""
    host = None
    if volume_type.host_local:
        if instance is None:
            raise ValidationFailed("A host-local volume type needs the instance whose host will hold the volume.",
                                   code=Code.HOST_LOCAL_NEEDS_INSTANCE, errors={"instance": ["required"]})
        if instance.project_id != project.pk:
            raise reference_not_found("instance")
        if instance.host_id is None:
            raise Conflict("The instance has no host yet; create the volume once it is placed.",
                           code=Code.INSTANCE_NOT_PLACED)
        host = instance.host
        zone = zone or host.zone
    elif instance is not None:
        raise ValidationFailed("instance is only for host-local volume types.", errors={"instance": [
            "only for host-local volume types"]})
    zones = list(volume_type.zones.all())
    if zone is not None and zones and zone not in zones:
        raise ValidationFailed(f"Volume type {volume_type.name!r} is not served in zone {zone.name!r}.",
                               code=Code.ZONE_NOT_SERVED, errors={"zone": [f"one of {', '.join(z.name for z in zones)}"]})
    if host is not None and zone is not None and host.zone_id != zone.pk:
        raise ValidationFailed("The instance's host is in another zone.", code=Code.ZONE_NOT_SERVED,
                               errors={"zone": [f"the instance's zone {host.zone.name}"]})
    if zone is None and zones:
        zone = min(zones, key=lambda z: z.name)
    return zone, host


def _source(project, volume_type, source_snapshot: Snapshot | None, source_image):
    """The volume type and minimum size the source implies: a snapshot restores into its volume's type (the same
    pool) and at least its size; an image needs at least its `min_disk_gib`."""
    if source_snapshot is not None and source_image is not None:
        raise ValidationFailed("Give source_snapshot or source_image, not both.",
                               errors={"source_image": ["not with source_snapshot"]})
    if source_snapshot is not None:
        if source_snapshot.project_id != project.pk:
            raise reference_not_found("source_snapshot")
        if source_snapshot.status != SnapshotStatus.AVAILABLE:
            raise InvalidState(f"The snapshot is {source_snapshot.status}; only an available one restores.",
                               current_state=source_snapshot.status, allowed_states=["available"])
        parent_type = source_snapshot.volume.volume_type
        if volume_type is not None and volume_type.pk != parent_type.pk:
            raise ValidationFailed("A snapshot restores into its volume's type.",
                                   errors={"volume_type": [f"{parent_type.name} (the snapshot's)"]})
        return parent_type, source_snapshot.size_gib
    if volume_type is None:
        raise ValidationFailed("Invalid input: volume_type.", errors={"volume_type": ["This field is required."]})
    return volume_type, (source_image.min_disk_gib if source_image is not None else 0)


def quota_keys(volume_type: VolumeType, size_gib: int, count: int = 1) -> list[tuple[str, int]]:
    """The tenancy quota resources a volume holds: ``volumes`` and ``volume_gib:<type>`` (which also checks
    ``volume_gib``)."""
    return [("volumes", count), (f"volume_gib:{volume_type.name}", size_gib)]


@atomic_with_retry
def volume_create(*, actor, project, name: str, size_gib: int | None = None, volume_type: VolumeType | None = None,
                  description: str = "", source_snapshot: Snapshot | None = None, source_image=None, zone=None,
                  instance=None, delete_on_termination: bool = False,
                  request_id: str = "") -> tuple[Volume, Operation]:
    """Create a volume (`creating`) and start its `volume.create` operation; returns (volume, operation).

    `size_gib` defaults to the source's size (snapshot) or the type's minimum. Restoring a snapshot is a create
    with `source_snapshot`. The volume is `bootable` when made from an image or restored from a snapshot of a
    bootable volume. `instance`: for a host-local type, the instance whose host holds the volume."""
    authorize_project(actor, project, WRITERS)
    validate_name(name)
    volume_type, floor = _source(project, volume_type, source_snapshot, source_image)
    if not volume_type.is_active:
        raise ValidationFailed(f"Volume type {volume_type.name!r} is not offered.", code=Code.VOLUME_TYPE_INACTIVE,
                               errors={"volume_type": ["not offered"]})
    size_gib = _size(volume_type, size_gib if size_gib is not None else max(floor, volume_type.min_size_gib), floor)
    if source_snapshot is not None:  # restored where the snapshot's volume was (the same pool)
        zone, host = source_snapshot.volume.zone, source_snapshot.volume.host
    else:
        zone, host = _placement(volume_type, zone, instance, project)
    with transaction.atomic():
        for key, amount in quota_keys(volume_type, size_gib):
            quota_check(scope=project, resource=key, requested=amount)
        detail = f"A volume named {name!r} exists in this project."
        if Volume.objects.filter(project=project, name=name).exclude(status="deleted").exists():
            raise Conflict(detail, code=Code.NAME_TAKEN)
        with unique_conflict(detail, code=Code.NAME_TAKEN):
            volume = Volume.objects.create(
                project=project, name=name, description=description, size_gib=size_gib, volume_type=volume_type,
                source_snapshot=source_snapshot, source_image=source_image, zone=zone, host=host,
                delete_on_termination=delete_on_termination,
                bootable=source_image is not None or (source_snapshot is not None
                                                      and source_snapshot.volume.bootable))
        op = operation_start(kind=CREATE, target_type=VOLUME_TARGET, target_id=volume.pk, project=project,
                             actor=actor, request_id=request_id)
        audit_record(actor=actor, action="storage.volume.create", target=volume, after={
            "name": name, "size_gib": size_gib, "volume_type": volume_type.name,
            "source_snapshot": str(source_snapshot.pk) if source_snapshot else None,
            "source_image": source_image.name if source_image else None, "zone": zone.name if zone else None,
            "host": host.name if host else None, "operation": str(op.pk)})
    return volume, op


def volume_update(*, actor, volume: Volume, **fields) -> Volume:
    """Rename a volume or change `description` / `delete_on_termination` (no backend work). 409 `name_taken`;
    409 `invalid_state` for a `deleted` volume (its row is a tombstone kept for billing and audit, as every
    other action on it is refused)."""
    authorize_project(actor, volume.project, WRITERS)
    fields = {k: v for k, v in fields.items() if k in ("name", "description", "delete_on_termination")}
    if "name" in fields:
        validate_name(fields["name"])
    with transaction.atomic():
        locked = Volume.objects.select_for_update().get(pk=volume.pk)
        if locked.status == VolumeStatus.DELETED:
            raise InvalidState("The volume is deleted; it cannot be changed.", current_state=locked.status,
                               allowed_states=sorted(LIVE_STATUSES), action="update")
        before = {k: getattr(locked, k) for k in fields}
        for key, value in fields.items():
            setattr(locked, key, value)
        with unique_conflict(f"A volume named {locked.name!r} exists in this project.", code=Code.NAME_TAKEN):
            locked.save()
        audit_record(actor=actor, action="storage.volume.update", target=locked, before=before, after=fields)
    return locked


def volume_extend(*, actor, volume: Volume, size_gib: int) -> Operation:
    """Grow a volume to `size_gib` GiB: `available` → `extending` → `available`, or attached to one instance
    `in-use` → `extending` → `in-use` (a running guest sees the new capacity at once: libvirt's blockResize; a
    stopped one at its next boot). The new size counts against the quotas from the request on; a failed extend
    returns the volume to its old size (and status). 400
    `size_must_grow` unless larger (a volume never shrinks: the guest's filesystem would be cut); 409
    `invalid_state` unless available or in-use (with `allowed_states`), 409 `volume_in_use` for a multi-attach
    volume attached to several instances (its guests would not all see it grow); 422 on quota."""
    from ..models import VolumeAttachment

    authorize_project(actor, volume.project, WRITERS)
    if not isinstance(size_gib, int) or size_gib <= volume.size_gib:
        raise ValidationFailed(f"size_gib must be larger than the volume's {volume.size_gib} GiB; volumes only grow.",
                               code=Code.SIZE_MUST_GROW,
                               errors={"size_gib": [f"Must be larger than {volume.size_gib} GiB: volumes never shrink."]})
    _size(volume.volume_type, size_gib)
    with transaction.atomic():
        if VolumeAttachment.objects.filter(volume=volume).count() > 1:
            raise Conflict("The volume is attached to several instances; detach all but one to extend it.",
                           code=Code.VOLUME_IN_USE, instances=sorted(
                               str(i) for i in VolumeAttachment.objects.filter(volume=volume)
                               .values_list("instance_id", flat=True)))
        quota_check(scope=volume.project, resource=f"volume_gib:{volume.volume_type.name}",
                    requested=size_gib - volume.size_gib)
        old = volume.size_gib
        before = transition(volume, "extend", VOLUME_TRANSITIONS, extra={"size_gib": size_gib})
        op = operation_start(kind=EXTEND, target_type=VOLUME_TARGET, target_id=volume.pk, project=volume.project,
                             actor=actor, state={"from_size_gib": old, "to_size_gib": size_gib})
        audit_record(actor=actor, action="storage.volume.extend", target=volume,
                     before={"status": before, "size_gib": old},
                     after={"status": volume.status, "size_gib": size_gib, "operation": str(op.pk)})
    return op


def _refuse_attached(volume: Volume) -> None:
    """409 `invalid_state` naming the `instances` while `volume` has any attachment, whatever its status (an
    attached volume in `error` too: its disk is still in the instance's domain; detach it first)."""
    from ..models import VolumeAttachment

    instances = sorted({str(i) for i in VolumeAttachment.objects.filter(volume=volume)
                        .values_list("instance_id", flat=True)})
    if instances:
        raise InvalidState(f"The volume is attached ({volume.status}); detach it first.", current_state=volume.status,
                           allowed_states=["available", "error"], instances=instances, action="delete")


def volume_delete(*, actor, volume: Volume) -> Operation:
    """Delete an available (or failed) volume: `deleting` → `deleted` (the row stays, for billing and audit).
    409 `invalid_state` while busy, or while attached whatever its status (naming the `instances`: detach it
    first). Its snapshots stay (they are full copies, `drivers.base`)."""
    authorize_project(actor, volume.project, WRITERS)
    with transaction.atomic():
        locked = Volume.objects.select_for_update().get(pk=volume.pk)
        _refuse_attached(locked)
        before = transition(locked, "delete", VOLUME_TRANSITIONS)
        usage_close(locked)  # a volume the tenant asked to delete is not billed while it goes
        op = operation_start(kind=DELETE, target_type=VOLUME_TARGET, target_id=locked.pk, project=locked.project,
                             actor=actor)
        audit_record(actor=actor, action="storage.volume.delete", target=locked, before={"status": before},
                     after={"status": locked.status, "operation": str(op.pk)})
    volume.status = locked.status
    return op


def volume_backend_make(volume: Volume) -> None:
    """Make `volume` (`creating`, row-locked) on its backend: empty, a copy-on-write child of its image, or a copy
    of its snapshot; then it is `available` and metered. Keyed by the volume id: a retry finds what the last try
    made (the `volume.create` step, and an instance create's `prepare_volumes`)."""
    from apps.core.drivers import DriverNotFound

    from .backend import driver_for, pool_spec, volume_spec
    from .usage import usage_open

    drv = driver_for(volume.host)
    pool = volume.volume_type.pool
    drv.pool_ensure(pool_spec(volume.volume_type))
    try:
        info = drv.volume_get(pool, str(volume.pk))
    except DriverNotFound:
        if volume.source_snapshot_id is not None:
            info = drv.volume_from_snapshot(pool, str(volume.source_snapshot_id), volume_spec(volume))
        else:
            info = drv.volume_create(volume_spec(volume, backing=_backing(volume)))
    transition(volume, "created", VOLUME_TRANSITIONS, extra={"backend_path": info.path[:500], "error_code": "",
                                                             "error_reason": ""})
    usage_open(volume)


def _backing(volume: Volume) -> str:
    if volume.source_image_id is None:
        return ""
    from apps.compute.selectors import image_file_path

    return image_file_path(volume.source_image)


def volume_mark_deleted(volume: Volume) -> None:
    """The end of the delete operation (called by the workflow, in its step's transaction)."""
    transition(volume, "deleted", VOLUME_TRANSITIONS, extra={"deleted_at": now()})
