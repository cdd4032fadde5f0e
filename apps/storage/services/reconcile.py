"""Attachments of deleted instances: the instance's delete removed its domain, and the volume's disk with it, so the
attachment rows go and the volume is `available` again; one with `delete_on_termination` is then deleted (Nova's
delete_on_termination). Done by the instance's delete workflow through compute's delete hook
(`instance_attachments_release`, as the system); beat (`storage.attachments_reconcile_task`, every 5 minutes)
only catches what that missed (`attachments_reconcile`)."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.transitions import transition

from ..models import Volume, VolumeAttachment
from ..states import VOLUME_TRANSITIONS, AttachmentStatus, VolumeStatus
from .volumes import volume_delete

log = logging.getLogger("gpucloud.storage")


@dataclass
class ReconcileResult:
    released: list[str] = field(default_factory=list)   # attachment ids
    deleted: list[str] = field(default_factory=list)    # volume ids whose delete started


def _release(attachment_id, volume_id, result: ReconcileResult) -> None:
    """Release one `attached` attachment of a deleted (or deleting) instance, whether its volume is `in-use` or
    `error`; a volume without attachments left is `available` again (an `error` one stays `error`, and is
    deletable), or deleted when it has `delete_on_termination`. A volume in a transient state is left to its
    operation (`attachments_reconcile` comes back for it). Lock order: attachment, volume."""
    with transaction.atomic():
        if not VolumeAttachment.objects.select_for_update().filter(
                pk=attachment_id, status=AttachmentStatus.ATTACHED).exists():
            return
        volume = Volume.objects.select_for_update(of=("self",)).select_related("project").get(pk=volume_id)
        if volume.status not in (VolumeStatus.IN_USE, VolumeStatus.ERROR):
            return  # an operation in flight (an extend) settles it first; the beat task comes back for it
        VolumeAttachment.objects.filter(pk=attachment_id).delete()
        result.released.append(str(attachment_id))
        if VolumeAttachment.objects.filter(volume=volume).exists():
            return  # a multi-attach volume still attached elsewhere
        before = volume.status
        if before == VolumeStatus.IN_USE:
            transition(volume, "released", VOLUME_TRANSITIONS)
        audit_record(actor=None, action="storage.volume.released", target=volume,
                     before={"status": before}, after={"status": volume.status})
        if volume.delete_on_termination:
            volume_delete(actor=None, volume=volume)
            result.deleted.append(str(volume.pk))


def instance_attachments_release(*, instance) -> ReconcileResult:
    """Compute's delete hook (`apps.compute.services.volumes.register_delete_hook`): release the attachments of
    `instance`, whose delete workflow has removed its domain (and the disks with it), in that workflow's step.
    An attach or detach in flight is left to its operation (and then to `attachments_reconcile`)."""
    result = ReconcileResult()
    rows = (VolumeAttachment.objects.filter(instance_id=instance.pk, status=AttachmentStatus.ATTACHED)
            .order_by("device").values_list("pk", "volume_id"))
    for attachment_id, volume_id in rows:
        _release(attachment_id, volume_id, result)
    return result


def attachments_reconcile(*, limit: int = 500) -> ReconcileResult:
    """The safety net behind `instance_attachments_release`: release up to `limit` attachments (status
    `attached`) whose instance is `deleted` but still has them (an attach that finished after the instance's
    delete released its volumes; a delete that passed that step before it existed). An attach or detach in
    flight is left to its operation. Each volume in its own transaction."""
    result = ReconcileResult()
    rows = (VolumeAttachment.objects.filter(instance__status="deleted", status=AttachmentStatus.ATTACHED)
            .values_list("pk", "volume_id")[:limit])
    for attachment_id, volume_id in rows:
        _release(attachment_id, volume_id, result)
    if result.released:
        log.info("storage_attachments_released", extra={"released": len(result.released),
                                                         "deleted": len(result.deleted)})
    return result
