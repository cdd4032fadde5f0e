"""Tenant-owned block storage: volumes, their attachments to instances, and snapshots."""
from django.db import models

from apps.core.models import ProjectOwned, TimestampedModel

from ..states import AttachmentStatus, SnapshotStatus, VolumeStatus

#: The most data volumes attached to one instance at once (devices vdb .. vdq; vda is the image disk or the boot
#: volume). Our product
#: limit, below the PCI slots a virtio-blk disk uses on the guest's root bus.
MAX_ATTACHMENTS_PER_INSTANCE = 16


class Volume(ProjectOwned):
    """A block device of `size_gib` GiB (whole GiB) of one `volume_type`. `status` is ours
    (`states.VOLUME_TRANSITIONS`). Made empty, or from `source_snapshot` (a snapshot of the project), or from
    `source_image` (a boot image: the volume starts as a copy-on-write child of the image file). `host` is the
    hypervisor holding a host-local type's volume (else null); `zone` where it is served (null: the type's
    zones are all one). `delete_on_termination`: the volume goes when the instance it is attached to is deleted.
    `backend_path` is where the driver put it (a file or device path), written by the create operation.
    `bootable`: made from an image or restored from a bootable volume's snapshot (it can be a boot volume)."""

    name = models.CharField(max_length=63)
    description = models.CharField(max_length=500, blank=True)
    size_gib = models.PositiveIntegerField()
    volume_type = models.ForeignKey("storage.VolumeType", on_delete=models.PROTECT, related_name="volumes")
    status = models.CharField(max_length=16, choices=VolumeStatus.choices, default=VolumeStatus.CREATING,
                              db_index=True)
    source_snapshot = models.ForeignKey("storage.Snapshot", on_delete=models.PROTECT, null=True, blank=True,
                                        related_name="+")
    source_image = models.ForeignKey("compute.Image", on_delete=models.PROTECT, null=True, blank=True,
                                     related_name="+")
    zone = models.ForeignKey("inventory.Zone", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    host = models.ForeignKey("inventory.Host", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    delete_on_termination = models.BooleanField(default=False)
    # holds a system an instance can boot from: made from an image, or restored from a snapshot of a bootable
    # volume (an empty volume is not); only a bootable volume is an instance's boot volume
    bootable = models.BooleanField(default=False)
    backend_path = models.CharField(max_length=500, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    error_reason = models.CharField(max_length=1000, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], condition=~models.Q(status="deleted"),
                                               name="storage_volume_project_name_live")]

    def __str__(self) -> str:
        return self.name


class VolumeAttachment(TimestampedModel):
    """`volume` attached to `instance` (same project) as guest disk `device` (``vdb`` ..). The row exists from the
    attach request until the detach finished (`status` attaching → attached → detaching; `reserved` while the
    instance's create has not attached it yet). `boot`: the instance boots from this volume (device ``vda``,
    instead of the image disk); it detaches only while the instance is stopped. `made_by_create`: the instance's
    create made the volume (a failed create deletes it when it has `delete_on_termination`)."""

    volume = models.ForeignKey(Volume, on_delete=models.PROTECT, related_name="attachments")
    instance = models.ForeignKey("compute.Instance", on_delete=models.PROTECT, related_name="+")
    device = models.CharField(max_length=8)
    boot = models.BooleanField(default=False)
    made_by_create = models.BooleanField(default=False)
    # an instance create's change of an existing volume's `delete_on_termination` (null: none asked): applied
    # when the create attaches the volume, undone when the create fails
    delete_on_termination = models.BooleanField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=AttachmentStatus.choices, default=AttachmentStatus.ATTACHING)

    class Meta:
        ordering = ["device"]
        constraints = [
            models.UniqueConstraint(fields=["instance", "device"], name="storage_attachment_instance_device"),
            models.UniqueConstraint(fields=["volume", "instance"], name="storage_attachment_volume_instance"),
        ]


class Snapshot(ProjectOwned):
    """A point-in-time copy of `volume` (same project). `size_gib` is the volume's size when it was taken (a
    volume made from it is at least that big); `size_bytes` what the backend reports it occupies."""

    name = models.CharField(max_length=63)
    description = models.CharField(max_length=500, blank=True)
    volume = models.ForeignKey(Volume, on_delete=models.PROTECT, related_name="snapshots")
    status = models.CharField(max_length=16, choices=SnapshotStatus.choices, default=SnapshotStatus.CREATING,
                              db_index=True)
    size_gib = models.PositiveIntegerField()
    size_bytes = models.BigIntegerField(default=0)
    error_code = models.CharField(max_length=64, blank=True)
    error_reason = models.CharField(max_length=1000, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], condition=~models.Q(status="deleted"),
                                               name="storage_snapshot_project_name_live")]

    def __str__(self) -> str:
        return self.name


class VolumeUsage(models.Model):
    """How long `volume` held `size_gib` GiB of the type `volume_type_name`: `[start, end)`, `end` null while it
    does. Opened when the create finished, closed and opened again at the new size when an extend finished, closed
    at the delete request (`services.usage`); billing reads them (usage source ``storage.volume``)."""

    id = models.BigAutoField(primary_key=True)
    volume = models.ForeignKey(Volume, on_delete=models.PROTECT, related_name="usage")
    project = models.ForeignKey("tenancy.Project", on_delete=models.PROTECT, related_name="+")
    volume_type_name = models.CharField(max_length=63)
    size_gib = models.PositiveIntegerField()
    start = models.DateTimeField()
    end = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["start"]
        constraints = [
            models.CheckConstraint(condition=models.Q(end__isnull=True) | models.Q(end__gt=models.F("start")),
                                   name="storage_usage_end_after_start"),
            models.UniqueConstraint(fields=["volume"], condition=models.Q(end__isnull=True),
                                    name="storage_usage_one_open"),
        ]
        indexes = [models.Index(fields=["start", "end"], name="storage_usage_window")]
