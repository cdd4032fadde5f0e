"""Storage API serializers: `*Input` parse requests, `*Output` format responses.

Ids in request bodies resolve among the objects the caller can see (`apps.core.references.VisibleField`): another
tenant's id is "Not found." (400), as an id that does not exist (ADR 0010)."""
from rest_framework import serializers

from apps.compute.selectors import image_list_visible_to, instance_list_visible_to
from apps.core.references import VisibleField
from apps.core.serializers import ModelSerializer, Serializer
from apps.inventory.models import Zone
from apps.operations.api.serializers import OperationOutput
from apps.tenancy.selectors import is_staff, project_list_visible_to

from ..models import Snapshot, Volume, VolumeAttachment, VolumeType
from ..selectors import (
    snapshot_list_visible_to,
    volume_list_visible_to,
    volume_sku,
    volume_type_list_visible_to,
)
from ..states import Backend

POOL_FIELDS = ("pool", "pool_kind", "pool_target_path", "pool_source")


class ZoneNameField(serializers.SlugRelatedField):
    """A zone by name (zones are the provider's public catalog, `GET /zones`)."""

    def __init__(self, **kwargs):
        super().__init__(slug_field="name", queryset=Zone.objects.all(), **kwargs)


class VolumeTypeOutput(ModelSerializer):
    """A tier. The pool members (`pool`, `pool_kind`, `pool_target_path`, `pool_source`) are shown to staff
    only (empty strings for tenants)."""

    zones = serializers.SerializerMethodField()
    sku = serializers.SerializerMethodField()

    class Meta:
        model = VolumeType
        fields = ["id", "name", "description", "backend", *POOL_FIELDS, "iops_class", "throughput_class", "zones",
                  "multi_attach", "host_local", "min_size_gib", "max_size_gib", "is_active", "sku", "created_at"]
        read_only_fields = fields

    def get_zones(self, obj) -> list[str]:
        """The names of the zones serving the type ([]: every zone)."""
        return sorted(z.name for z in obj.zones.all())

    def get_sku(self, obj) -> str:
        """The billing SKU of the type's storage (``volume:type=<name>``; priced per GiB in a price book)."""
        return volume_sku(obj.name)

    def to_representation(self, instance):
        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is None or not is_staff(request.user):
            data.update({f: "" for f in POOL_FIELDS})
        return data


class VolumeTypeCreateInput(Serializer):
    name = serializers.SlugField(max_length=63)
    description = serializers.CharField(max_length=500, required=False, default="", allow_blank=True)
    backend = serializers.ChoiceField(choices=Backend.choices, default=Backend.LIBVIRT)
    pool = serializers.CharField(max_length=63, help_text="the backend pool's name (a libvirt storage pool)")
    pool_kind = serializers.CharField(max_length=16, default="dir", help_text="libvirt pool type: dir, logical, ...")
    pool_target_path = serializers.CharField(max_length=500, required=False, default="", allow_blank=True,
                                             help_text="the pool's target (a directory for dir pools)")
    pool_source = serializers.CharField(max_length=500, required=False, default="", allow_blank=True,
                                        help_text="the pool's source (a device or volume group), if its kind has one")
    iops_class = serializers.CharField(max_length=32, required=False, default="", allow_blank=True)
    throughput_class = serializers.CharField(max_length=32, required=False, default="", allow_blank=True)
    zones = ZoneNameField(many=True, required=False, default=list,
                          help_text="names of the zones serving the type (none: every zone)")
    multi_attach = serializers.BooleanField(default=False)
    host_local = serializers.BooleanField(default=False)
    min_size_gib = serializers.IntegerField(min_value=1, max_value=1048576, default=1)
    max_size_gib = serializers.IntegerField(min_value=1, max_value=1048576, default=16384)
    is_active = serializers.BooleanField(default=True)


class VolumeTypeUpdateInput(Serializer):
    """The members to change (the pool members only while the type has no live volume)."""

    name = serializers.SlugField(max_length=63, required=False)
    description = serializers.CharField(max_length=500, required=False, allow_blank=True)
    backend = serializers.ChoiceField(choices=Backend.choices, required=False)
    pool = serializers.CharField(max_length=63, required=False)
    pool_kind = serializers.CharField(max_length=16, required=False)
    pool_target_path = serializers.CharField(max_length=500, required=False, allow_blank=True)
    pool_source = serializers.CharField(max_length=500, required=False, allow_blank=True)
    iops_class = serializers.CharField(max_length=32, required=False, allow_blank=True)
    throughput_class = serializers.CharField(max_length=32, required=False, allow_blank=True)
    zones = ZoneNameField(many=True, required=False)
    multi_attach = serializers.BooleanField(required=False)
    host_local = serializers.BooleanField(required=False)
    min_size_gib = serializers.IntegerField(min_value=1, max_value=1048576, required=False)
    max_size_gib = serializers.IntegerField(min_value=1, max_value=1048576, required=False)
    is_active = serializers.BooleanField(required=False)


class VolumeAttachmentOutput(ModelSerializer):
    instance = serializers.UUIDField(source="instance_id", read_only=True)

    class Meta:
        model = VolumeAttachment
        fields = ["instance", "device", "boot", "status", "created_at"]
        read_only_fields = fields


class VolumeOutput(ModelSerializer):
    """`size_gib` in GiB; `attachments`: the instances it is attached to (device ``vdb`` ..; the guest sees it as
    ``/dev/disk/by-id/virtio-<id without dashes, first 20 characters>``); `bootable`: it holds a system an
    instance can boot from (made from an image, or restored from a snapshot of a bootable volume)."""

    project = serializers.UUIDField(source="project_id", read_only=True)
    volume_type = serializers.UUIDField(source="volume_type_id", read_only=True)
    source_snapshot = serializers.UUIDField(source="source_snapshot_id", read_only=True, allow_null=True)
    source_image = serializers.UUIDField(source="source_image_id", read_only=True, allow_null=True)
    zone = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    attachments = VolumeAttachmentOutput(many=True, read_only=True)

    class Meta:
        model = Volume
        fields = ["id", "project", "name", "description", "size_gib", "volume_type", "status", "source_snapshot",
                  "source_image", "zone", "delete_on_termination", "bootable", "attachments", "error_code",
                  "error_reason", "created_at", "updated_at", "deleted_at"]
        read_only_fields = fields


class VolumeCreateInput(Serializer):
    """Restore a snapshot into a new volume with `source_snapshot` (its type; at least its size)."""

    project = VisibleField(project_list_visible_to)
    name = serializers.CharField(max_length=255)
    description = serializers.CharField(max_length=500, required=False, default="", allow_blank=True)
    size_gib = serializers.IntegerField(min_value=1, max_value=1048576, required=False, allow_null=True, default=None,
                                        help_text="GiB; default: the source snapshot's size or the type's minimum")
    volume_type = VisibleField(volume_type_list_visible_to, required=False, allow_null=True, default=None,
                               help_text="required unless source_snapshot is given")
    source_snapshot = VisibleField(snapshot_list_visible_to, required=False, allow_null=True, default=None)
    source_image = VisibleField(image_list_visible_to, required=False, allow_null=True, default=None)
    zone = ZoneNameField(required=False, allow_null=True, default=None,
                         help_text="the name of a zone serving the type (default: the type's first zone by name)")
    instance = VisibleField(instance_list_visible_to, required=False, allow_null=True, default=None,
                            help_text="host-local types only: the instance whose host holds the volume")
    delete_on_termination = serializers.BooleanField(default=False)


class VolumeUpdateInput(Serializer):
    name = serializers.CharField(max_length=255, required=False)
    description = serializers.CharField(max_length=500, required=False, allow_blank=True)
    delete_on_termination = serializers.BooleanField(required=False)


class VolumeExtendInput(Serializer):
    size_gib = serializers.IntegerField(min_value=1, max_value=1048576, help_text="the new size in GiB (larger)")


class VolumeAttachInput(Serializer):
    instance = VisibleField(instance_list_visible_to, help_text="an active or stopped instance of the project")


class VolumeAccepted(Serializer):
    """202 body: the volume and the operation doing the work (also in the Location header)."""

    volume = VolumeOutput()
    operation = OperationOutput()


class SnapshotOutput(ModelSerializer):
    project = serializers.UUIDField(source="project_id", read_only=True)
    volume = serializers.UUIDField(source="volume_id", read_only=True)

    class Meta:
        model = Snapshot
        fields = ["id", "project", "volume", "name", "description", "status", "size_gib", "size_bytes",
                  "error_code", "error_reason", "created_at", "updated_at", "deleted_at"]
        read_only_fields = fields


class SnapshotCreateInput(Serializer):
    volume = VisibleField(volume_list_visible_to, help_text="an available or in-use volume")
    name = serializers.CharField(max_length=255)
    description = serializers.CharField(max_length=500, required=False, default="", allow_blank=True)


class SnapshotAccepted(Serializer):
    snapshot = SnapshotOutput()
    operation = OperationOutput()
