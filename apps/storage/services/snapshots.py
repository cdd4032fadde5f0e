"""Snapshot writes: create (of an available or in-use volume) and delete. A volume is restored from a snapshot by
creating a new volume with `source_snapshot` (`services.volumes.volume_create`).

Errors: 400 `validation_error` (name); 409 `invalid_state` (the volume's or the snapshot's, with
`allowed_states`), `volume_in_use` (a running instance holds the volume), `name_taken`, `snapshot_in_use` (a
volume is being created from it)."""
from __future__ import annotations

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.db import atomic_with_retry, unique_conflict
from apps.core.errors import Conflict, InvalidState
from apps.core.transitions import transition
from apps.operations.models import Operation
from apps.operations.runner import operation_start
from apps.tenancy.authz import authorize_project
from apps.tenancy.quotas import quota_check

from ..errors import Code
from ..models import Snapshot, Volume
from ..states import SNAPSHOT_TRANSITIONS, VolumeStatus
from ._common import SNAPSHOT_TARGET, WRITERS, validate_name

CREATE, DELETE = "snapshot.create", "snapshot.delete"
SNAPSHOTTABLE = (VolumeStatus.AVAILABLE, VolumeStatus.IN_USE)


@atomic_with_retry
def snapshot_create(*, actor, volume: Volume, name: str, description: str = "",
                    request_id: str = "") -> tuple[Snapshot, Operation]:
    """Snapshot `volume` (`creating` → `available` by the `snapshot.create` operation): an available volume, or
    an in-use one whose instances are all stopped (a running guest holds the image open: 409 `volume_in_use`
    with `instances`). The snapshot is a full copy (`drivers.base`). 422 `quota_exceeded` past the `snapshots`
    quota."""
    authorize_project(actor, volume.project, WRITERS)
    validate_name(name)
    with transaction.atomic():
        quota_check(scope=volume.project, resource="snapshots", requested=1)  # locks the organization first
        locked = Volume.objects.select_for_update().get(pk=volume.pk)
        if locked.status not in SNAPSHOTTABLE:
            raise InvalidState(f"Cannot snapshot a volume that is {locked.status}.", current_state=locked.status,
                               allowed_states=sorted(SNAPSHOTTABLE))
        running = sorted(str(i) for i in locked.attachments.filter(instance__status="active")
                         .values_list("instance_id", flat=True))
        if running:
            raise Conflict("A running instance holds the volume open; stop it or detach the volume first.",
                           code=Code.VOLUME_IN_USE, instances=running)
        detail = f"A snapshot named {name!r} exists in this project."
        if Snapshot.objects.filter(project=locked.project, name=name).exclude(status="deleted").exists():
            raise Conflict(detail, code=Code.NAME_TAKEN)
        with unique_conflict(detail, code=Code.NAME_TAKEN):
            snapshot = Snapshot.objects.create(project=locked.project, volume=locked, name=name,
                                               description=description, size_gib=locked.size_gib)
        op = operation_start(kind=CREATE, target_type=SNAPSHOT_TARGET, target_id=snapshot.pk,
                             project=locked.project, actor=actor, request_id=request_id)
        audit_record(actor=actor, action="storage.snapshot.create", target=snapshot, after={
            "name": name, "volume": str(locked.pk), "size_gib": locked.size_gib, "operation": str(op.pk)})
    return snapshot, op


def snapshot_delete(*, actor, snapshot: Snapshot) -> Operation:
    """Delete an available (or failed) snapshot. 409 `snapshot_in_use` while a volume is being made from it."""
    authorize_project(actor, snapshot.project, WRITERS)
    with transaction.atomic():
        locked = Snapshot.objects.select_for_update().get(pk=snapshot.pk)
        if Volume.objects.filter(source_snapshot=locked, status=VolumeStatus.CREATING).exists():
            raise Conflict("A volume is being created from this snapshot.", code=Code.SNAPSHOT_IN_USE)
        before = transition(locked, "delete", SNAPSHOT_TRANSITIONS)
        op = operation_start(kind=DELETE, target_type=SNAPSHOT_TARGET, target_id=locked.pk,
                             project=locked.project, actor=actor)
        audit_record(actor=actor, action="storage.snapshot.delete", target=locked, before={"status": before},
                     after={"status": locked.status, "operation": str(op.pk)})
    snapshot.status = locked.status
    return op


def snapshot_mark_deleted(snapshot: Snapshot) -> None:
    transition(snapshot, "deleted", SNAPSHOT_TRANSITIONS, extra={"deleted_at": now()})
