"""Attach and detach volumes to instances (Cinder's attach/detach volume actions; Nova's volume attachments).

A volume attaches to an instance of its own project that is `active` (a live attach: the running guest sees a
new disk) or `stopped` (the disk is added to the domain's definition). The device is the first free of ``vdb``
.. ``vdq`` (at most `MAX_ATTACHMENTS_PER_INSTANCE`, 16); the disk's serial is the volume id, so the guest finds
it as ``/dev/disk/by-id/virtio-<the id without dashes, first 20 characters>``. A host-local volume attaches only to
instances on its host; a volume with a zone only to instances in that zone.

Errors: 400 "Not found." naming `instance` (another project's instance, as an id that does not exist; ADR
0010); 409 `invalid_state` (the volume: allowed_states; the instance: `instance_status` and its
allowed_states), `already_attached`, `not_attached`, `attachment_limit_reached`, `host_mismatch`,
`zone_mismatch`, `instance_not_placed`, `boot_volume_detach_not_allowed` (a boot volume never detaches while its
instance exists: docs/adr/1011-boot-volumes-stay-attached.md).
"""
from __future__ import annotations

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.errors import Conflict, InvalidState
from apps.core.references import reference_not_found
from apps.core.transitions import transition
from apps.operations.models import Operation
from apps.operations.runner import operation_start
from apps.tenancy.authz import authorize_project

from ..errors import Code
from ..models import Volume, VolumeAttachment
from ..models.volume import MAX_ATTACHMENTS_PER_INSTANCE
from ..states import VOLUME_TRANSITIONS, AttachmentStatus, VolumeStatus
from ._common import VOLUME_TARGET, WRITERS

ATTACH, DETACH = "volume.attach", "volume.detach"
DEVICES = tuple(f"vd{chr(ord('b') + i)}" for i in range(MAX_ATTACHMENTS_PER_INSTANCE))
INSTANCE_STATES = ("active", "stopped")


def _check_instance(volume: Volume, instance) -> None:
    if instance.project_id != volume.project_id:
        raise reference_not_found("instance")
    if instance.status not in INSTANCE_STATES:
        raise InvalidState(f"The instance is {instance.status}; volumes attach to active or stopped instances.",
                           instance_status=instance.status, allowed_states=list(INSTANCE_STATES))
    if instance.host_id is None:
        raise Conflict("The instance has no host.", code=Code.INSTANCE_NOT_PLACED)
    if volume.host_id is not None and volume.host_id != instance.host_id:
        raise Conflict("The volume is host-local to another host than the instance's.", code=Code.HOST_MISMATCH)
    if volume.zone_id is not None and instance.host.zone_id != volume.zone_id:
        raise Conflict("The volume is in another zone than the instance.", code=Code.ZONE_MISMATCH)


def _free_device(instance) -> str:
    used = set(VolumeAttachment.objects.filter(instance=instance).values_list("device", flat=True))
    for device in DEVICES:
        if device not in used:
            return device
    raise Conflict(f"The instance has {MAX_ATTACHMENTS_PER_INSTANCE} volumes attached, the most it may have.",
                   code=Code.ATTACHMENT_LIMIT_REACHED, limit=MAX_ATTACHMENTS_PER_INSTANCE)


def volume_attach(*, actor, volume: Volume, instance, boot: bool = False) -> tuple[VolumeAttachment, Operation]:
    """`available` (or, for a multi-attach type, `in-use`) → `attaching`; the `volume.attach` operation adds
    the disk and ends `in-use`. `boot` marks the instance's boot volume (set by volume-backed launches)."""
    from apps.compute.selectors import instance_for_update

    authorize_project(actor, volume.project, WRITERS)
    with transaction.atomic():
        inst = instance_for_update(instance.pk)
        _check_instance(volume, inst)
        if VolumeAttachment.objects.filter(volume=volume, instance=inst).exists():
            raise Conflict("The volume is attached to this instance.", code=Code.ALREADY_ATTACHED)
        action = "attach_multi" if volume.volume_type.multi_attach else "attach"
        before = transition(volume, action, VOLUME_TRANSITIONS)
        attachment = VolumeAttachment.objects.create(volume=volume, instance=inst, device=_free_device(inst),
                                                     boot=boot)
        op = operation_start(kind=ATTACH, target_type=VOLUME_TARGET, target_id=volume.pk, project=volume.project,
                             actor=actor, state={"attachment": str(attachment.pk), "instance": str(inst.pk),
                                                 "before": before})
        audit_record(actor=actor, action="storage.volume.attach", target=volume, before={"status": before},
                     after={"status": volume.status, "instance": str(inst.pk), "device": attachment.device,
                            "operation": str(op.pk)})
    return attachment, op


def volume_detach(*, actor, volume: Volume, instance) -> Operation:
    """`in-use` (or `error` while attached) → `detaching`; the `volume.detach` operation removes the disk from `instance` and ends
    `available` (or `in-use` while other attachments remain). 409 `not_attached` when it is not attached
    there; 409 `boot_volume_detach_not_allowed` for a boot volume (with `instances` and `instance_status`)."""
    from apps.compute.selectors import instance_for_update

    authorize_project(actor, volume.project, WRITERS)
    with transaction.atomic():
        inst = instance_for_update(instance.pk)
        if inst.project_id != volume.project_id:
            raise reference_not_found("instance")
        attachment = VolumeAttachment.objects.select_for_update().filter(
            volume=volume, instance=inst, status=AttachmentStatus.ATTACHED).first()
        if attachment is None:
            raise Conflict("The volume is not attached to this instance.", code=Code.NOT_ATTACHED)
        if attachment.boot:  # docs/adr/1011-boot-volumes-stay-attached.md
            raise Conflict("A boot volume stays attached while its instance exists: the instance could not start "
                           "without it. Snapshot it, or delete the instance (the volume is kept unless it has "
                           "delete_on_termination).", code=Code.BOOT_VOLUME, instances=[str(inst.pk)],
                           instance_status=inst.status)
        before = transition(volume, "detach", VOLUME_TRANSITIONS)
        VolumeAttachment.objects.filter(pk=attachment.pk).update(status=AttachmentStatus.DETACHING)
        op = operation_start(kind=DETACH, target_type=VOLUME_TARGET, target_id=volume.pk, project=volume.project,
                             actor=actor, state={"attachment": str(attachment.pk), "instance": str(inst.pk)})
        audit_record(actor=actor, action="storage.volume.detach", target=volume, before={"status": before},
                     after={"status": volume.status, "instance": str(inst.pk), "device": attachment.device,
                            "operation": str(op.pk)})
    return op


def volume_settle(volume: Volume) -> None:
    """The end of an attach or detach (the workflows): `available` without attachments, else `in-use`."""
    attached = VolumeAttachment.objects.filter(volume=volume).exists()
    if volume.status in (VolumeStatus.ATTACHING, VolumeStatus.DETACHING, VolumeStatus.EXTENDING):
        transition(volume, "settle_in_use" if attached else "settle_available", VOLUME_TRANSITIONS)


def instance_volume_disks(instance) -> list:
    """Compute's disk provider (`apps.compute.services.volumes.register_disk_provider`): the volumes whose disk
    is in `instance`'s domain (attached, or detaching: the detach step removes the disk and the row together)
    as `VolumeDisk`s, so a redefine of the domain keeps them. Path and format are asked from the volume's pool
    (as the attach step does); a logical pool's volumes are block devices."""
    from apps.compute.drivers.base import VolumeDisk

    from ..drivers.base import disk_serial
    from .backend import driver_for

    rows = (VolumeAttachment.objects.filter(instance_id=instance.pk,
                                            status__in=(AttachmentStatus.ATTACHED, AttachmentStatus.DETACHING))
            .select_related("volume__volume_type", "volume__host").order_by("device"))
    disks = []
    for att in rows:
        vol = att.volume
        drv = driver_for(vol.host)
        info = drv.volume_get(vol.volume_type.pool, str(vol.pk))
        disks.append(VolumeDisk(path=info.path, target_dev=att.device, serial=disk_serial(vol.pk),
                                format=info.format or "qcow2",
                                source_type="block" if vol.volume_type.pool_kind == "logical" else "file",
                                cache=getattr(driver_for(instance.host), "disk_cache", "none"), boot=att.boot))
    return disks
