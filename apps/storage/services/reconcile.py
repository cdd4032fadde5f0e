"""Attachments of deleted instances: the instance's delete removed its domain, and the volume's disk with it, so the
attachment rows go and the volume is `available` again; one with `delete_on_termination` is then deleted (Nova's
delete_on_termination). Run by beat (`storage.attachments_reconcile_task`) as the system."""
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


def attachments_reconcile(*, limit: int = 500) -> ReconcileResult:
    """Release up to `limit` attachments (status `attached`) whose instance is `deleted`; an attach or detach in
    flight is left to its operation. Each volume in its own transaction."""
    result = ReconcileResult()
    rows = (VolumeAttachment.objects.filter(instance__status="deleted", status=AttachmentStatus.ATTACHED)
            .values_list("pk", "volume_id")[:limit])
    for attachment_id, volume_id in rows:
        with transaction.atomic():  # the workflows' lock order: attachment, then volume
            if not VolumeAttachment.objects.select_for_update().filter(
                    pk=attachment_id, status=AttachmentStatus.ATTACHED).exists():
                continue
            volume = Volume.objects.select_for_update(of=("self",)).select_related("project").get(pk=volume_id)
            if volume.status != VolumeStatus.IN_USE:
                continue
            VolumeAttachment.objects.filter(pk=attachment_id).delete()
            result.released.append(str(attachment_id))
            if VolumeAttachment.objects.filter(volume=volume).exists():
                continue  # a multi-attach volume still attached elsewhere
            transition(volume, "released", VOLUME_TRANSITIONS)
            audit_record(actor=None, action="storage.volume.released", target=volume,
                         before={"status": VolumeStatus.IN_USE}, after={"status": volume.status})
            if volume.delete_on_termination:
                volume_delete(actor=None, volume=volume)
                result.deleted.append(str(volume.pk))
    if result.released:
        log.info("storage_attachments_released", extra={"released": len(result.released),
                                                         "deleted": len(result.deleted)})
    return result
