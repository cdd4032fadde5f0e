"""Compute API serializers: `*Input` parse requests, `*Output` format responses.

Ids in request bodies resolve among the objects the caller can see (`apps.core.references.VisibleField`): another
tenant's id is "Not found." (400), as an id that does not exist (ADR 0010)."""
import hashlib

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.references import VisibleField
from apps.core.serializers import ModelSerializer, Serializer
from apps.networking.selectors import (
    ib_partition_list_visible_to,
    security_group_list_visible_to,
    subnet_list_visible_to,
)
from apps.operations.api.serializers import OperationOutput
from apps.tenancy.selectors import organization_list_visible_to, project_list_visible_to

from ..drivers.base import USER_DATA_MAX_BYTES
from ..models import Cluster, Flavor, Image, Instance, SshKey
from ..selectors import flavor_list_visible_to, image_list_visible_to, ssh_key_list_visible_to
from ..states import GpuForm, ProvisioningKind, Visibility


class FlavorPriceOutput(Serializer):
    organization = serializers.UUIDField(help_text="one of the caller's organizations the flavor is offered to")
    currency = serializers.CharField(help_text="the organization's ISO 4217 billing currency")
    sla_tier = serializers.CharField(help_text="the organization's default SLA tier")
    on_demand_per_hour = serializers.CharField(allow_null=True,
                                               help_text="decimal string: one instance per hour; null when unpriced")
    spot_per_hour = serializers.CharField(allow_null=True,
                                          help_text="decimal string: its GPUs at the spot price per hour; null "
                                                    "without a GPU model or a spot price")


class FlavorOutput(ModelSerializer):
    """A flavor with what a launch wizard shows: the GPU form and model, `gpu_count`, the MIG profile
    (`mig_profile`), vGPU type (`vgpu_type`) or share (`share_milli`), and `prices`: the hourly price for each
    of the caller's organizations (tenants; empty for staff and when no price book prices it). The exact price
    for a project is in `POST /instances/check/`."""

    kind = serializers.CharField(read_only=True, help_text=(
        "provisioning kind: vm, or baremetal (a whole bare-metal host with gpu_count GPUs of gpu_model)"))
    prices = serializers.SerializerMethodField()

    class Meta:
        model = Flavor
        fields = ["id", "name", "description", "kind", "vcpus", "memory_mib", "disk_gib", "gpu_form", "gpu_model",
                  "gpu_count", "mig_profile", "vgpu_type", "share_milli", "hugepages", "visibility", "is_active",
                  "prices", "created_at"]
        read_only_fields = fields

    @extend_schema_field(FlavorPriceOutput(many=True))
    def get_prices(self, obj) -> list[dict]:
        cache = self.context.setdefault("flavor_prices", {})
        if obj.pk not in cache:
            cache.update(flavor_prices_for(self.context.get("request"), [obj]))
        return cache.get(obj.pk, [])


def flavor_prices_for(request, flavors) -> dict:
    """`apps.compute.billing.flavor_prices` for the organizations a tenant caller belongs to ({} for staff and
    callers without a request)."""
    from apps.tenancy.selectors import is_staff

    from ..billing import flavor_prices

    user = getattr(request, "user", None)
    if user is None or is_staff(user):
        return {}
    return flavor_prices(flavors, organization_list_visible_to(user).order_by("slug"))


class FlavorCreateInput(Serializer):
    name = serializers.SlugField(max_length=63)
    kind = serializers.ChoiceField(choices=ProvisioningKind.choices, default=ProvisioningKind.VM, help_text=(
        "vm, or baremetal: a whole bare-metal host (gpu_form gpu, gpu_count = the host's GPU count)"))
    description = serializers.CharField(max_length=500, required=False, default="", allow_blank=True)
    vcpus = serializers.IntegerField(min_value=1, max_value=1024)
    memory_mib = serializers.IntegerField(min_value=64)
    disk_gib = serializers.IntegerField(min_value=0, default=0)
    gpu_form = serializers.ChoiceField(choices=GpuForm.choices, default=GpuForm.NONE)
    gpu_model = serializers.CharField(max_length=32, required=False, default="", allow_blank=True)
    gpu_count = serializers.IntegerField(min_value=0, max_value=16, default=0)
    mig_profile = serializers.CharField(max_length=32, required=False, default="", allow_blank=True)
    vgpu_type = serializers.CharField(max_length=32, required=False, default="", allow_blank=True)
    share_milli = serializers.IntegerField(min_value=0, max_value=999, default=0)
    hugepages = serializers.BooleanField(default=False)
    visibility = serializers.ChoiceField(choices=Visibility.choices, default=Visibility.PUBLIC)
    organizations = VisibleField(organization_list_visible_to, many=True, required=False, default=list,
                                 max_length=1000, help_text="organizations offered a private flavor")


class ImageOutput(ModelSerializer):
    class Meta:
        model = Image
        fields = ["id", "name", "os", "os_version", "arch", "cloud_init", "source_url", "checksum", "disk_format",
                  "min_disk_gib", "secure_boot", "is_active", "created_at"]
        read_only_fields = fields


class ImageCreateInput(Serializer):
    name = serializers.SlugField(max_length=63)
    os = serializers.CharField(max_length=32)
    os_version = serializers.CharField(max_length=32, required=False, default="", allow_blank=True)
    arch = serializers.ChoiceField(choices=["x86_64", "aarch64"], default="x86_64")
    cloud_init = serializers.BooleanField(default=True)
    source_url = serializers.URLField(max_length=500)
    checksum = serializers.CharField(max_length=100)
    disk_format = serializers.ChoiceField(choices=["qcow2", "raw"], default="qcow2")
    min_disk_gib = serializers.IntegerField(min_value=0, default=0)
    secure_boot = serializers.BooleanField(
        default=False, help_text="boot with UEFI Secure Boot; needs a kernel and modules signed for it (the NVIDIA "
                                 "driver then needs signed modules too)")


class SshKeyOutput(ModelSerializer):
    project = serializers.UUIDField(source="project_id", read_only=True)

    class Meta:
        model = SshKey
        fields = ["id", "project", "name", "public_key", "fingerprint", "created_at"]
        read_only_fields = fields


class SshKeyCreateInput(Serializer):
    project = VisibleField(project_list_visible_to)
    name = serializers.CharField(max_length=63)
    public_key = serializers.CharField(max_length=16384, trim_whitespace=True)


class InstancePortOutput(Serializer):
    id = serializers.UUIDField()
    subnet = serializers.UUIDField()
    mac_address = serializers.CharField()
    fixed_ips = serializers.ListField(child=serializers.IPAddressField())
    security_groups = serializers.ListField(child=serializers.UUIDField())


class InstancePartitionMemberOutput(Serializer):
    guid = serializers.CharField(help_text="0x-prefixed 64-bit port GUID")
    membership = serializers.CharField(help_text="full | limited")
    virtual = serializers.BooleanField(help_text="an SR-IOV VF's virtual GUID (else the host's physical HCA port)")


class InstancePartitionOutput(Serializer):
    id = serializers.UUIDField()
    pkey = serializers.IntegerField(help_text="P_Key without the membership bit")
    members = InstancePartitionMemberOutput(many=True)


class InstanceNetworkRequest(Serializer):
    subnet = serializers.UUIDField(required=False)
    security_groups = serializers.ListField(child=serializers.UUIDField(), required=False)
    ib_partition = serializers.UUIDField(required=False)


class InstanceMaintenanceOutput(Serializer):
    """A planned move of the instance off a failed GPU or host (docs/health.md, "Remediation")."""

    remediation = serializers.UUIDField()
    status = serializers.CharField(help_text="notice | proposed | approved | running | held")
    consent_mode = serializers.CharField()
    deadline_at = serializers.DateTimeField(allow_null=True, help_text="when an auto move starts: checkpoint before")
    reason = serializers.CharField()


class InstanceOutput(ModelSerializer):
    """`network` is what was asked at create; `ports` and `ib_partitions` what is attached now (the create
    workflow attaches them after placement; they go with the delete). `maintenance`: null, or the planned move
    off a failed GPU or host with its deadline (guest tooling polls it to checkpoint)."""

    project = serializers.UUIDField(source="project_id", read_only=True)
    flavor = serializers.UUIDField(source="flavor_id", read_only=True)
    image = serializers.UUIDField(source="image_id", read_only=True)
    cluster = serializers.UUIDField(source="cluster_id", read_only=True, allow_null=True)
    ssh_keys = serializers.SerializerMethodField()
    network = InstanceNetworkRequest(read_only=True)
    ports = serializers.SerializerMethodField()
    ib_partitions = serializers.SerializerMethodField()
    sla_tier = serializers.SerializerMethodField(help_text="SLA tier code it is bought at")
    maintenance = serializers.SerializerMethodField()
    user_data_sha256 = serializers.SerializerMethodField(help_text=(
        "lower-case hex SHA-256 of the create's user_data as UTF-8 bytes (of the empty string when none was given). "
        "The user data itself is never answered (it may hold secrets): a client that knows what it sent compares "
        "digests (the Terraform provider's import)"))

    class Meta:
        model = Instance
        fields = ["id", "project", "name", "flavor", "image", "ssh_keys", "cluster", "status", "observed_state",
                  "observed_at", "network", "ports", "ib_partitions", "error_code", "error_reason", "launched_at",
                  "deleted_at", "sla_tier", "maintenance", "user_data_sha256", "placement_policy", "created_at",
                  "updated_at"]
        read_only_fields = fields

    def get_user_data_sha256(self, obj) -> str:
        return hashlib.sha256((obj.user_data or "").encode()).hexdigest()

    def get_sla_tier(self, obj) -> str:
        return obj.sla_tier or obj.project.organization.default_sla_tier

    def get_ssh_keys(self, obj) -> list[str]:
        return [str(k.pk) for k in obj.ssh_keys.all()]

    def _networks(self, obj) -> dict:
        cache = self.context.setdefault("networks_by_instance", {})
        if obj.pk not in cache:
            from ..services.networks import networks_by_instance

            cache.update(networks_by_instance([obj.pk]))
        return cache[obj.pk]

    @extend_schema_field(InstanceMaintenanceOutput(allow_null=True))
    def get_maintenance(self, obj) -> dict | None:
        cache = self.context.get("maintenance_by_instance")
        if cache is None:
            from ..selectors import maintenance_by_instance

            return maintenance_by_instance([obj.pk]).get(obj.pk)
        return cache.get(obj.pk)

    @extend_schema_field(InstancePortOutput(many=True))
    def get_ports(self, obj) -> list[dict]:
        return self._networks(obj)["ports"]

    @extend_schema_field(InstancePartitionOutput(many=True))
    def get_ib_partitions(self, obj) -> list[dict]:
        return self._networks(obj)["ib_partitions"]


class NetworkFieldsInput(Serializer):
    subnet_id = VisibleField(subnet_list_visible_to, required=False, allow_null=True, default=None,
                             help_text="a subnet of the project: the instance gets a port with a fixed IP")
    security_group_ids = VisibleField(
        security_group_list_visible_to, many=True, required=False, default=list, max_length=16,
        help_text="security groups of the subnet's VPC for the port (default: the VPC's default group)")
    ib_partition_id = VisibleField(
        ib_partition_list_visible_to, required=False, allow_null=True, default=None,
        help_text="an InfiniBand partition of the project: the instance's HCA ports (whole host) or a VF's "
                  "virtual GUID join it as full members once placed")


class InstanceVolumeInput(Serializer):
    """One volume of a create: an existing volume of the project (`id`) or a new one (`size_gib`,
    `volume_type`, optional `name`). Block storage (docs/storage.md) checks them before anything is written."""

    id = VisibleField("apps.storage.selectors.volume_list_visible_to", required=False, allow_null=True,
                      default=None, help_text="an existing volume of the project: available, or in-use with a "
                                              "multi-attach type (409 volume_in_use otherwise)")
    name = serializers.CharField(max_length=63, required=False, allow_null=True, default=None,
                                 help_text="a new volume's name (default: '<instance>-<device>' or "
                                           "'<instance>-boot')")
    size_gib = serializers.IntegerField(min_value=1, required=False, allow_null=True, default=None,
                                        help_text="a new volume's size, whole GiB (default: the type's minimum; a "
                                                  "boot volume: max(flavor disk_gib, image min_disk_gib))")
    volume_type = VisibleField("apps.storage.selectors.volume_type_list_visible_to", required=False,
                               allow_null=True, default=None, help_text="a new volume's type")
    delete_on_termination = serializers.BooleanField(
        required=False, allow_null=True, default=None,
        help_text="delete the volume with the instance (new volumes: default false; existing: unchanged)")
    boot = serializers.BooleanField(required=False, default=False,
                                    help_text="boot from this volume (device vda, instead of the image disk); a "
                                              "new boot volume starts as a copy-on-write child of the image")


PLACEMENT_POLICY_HELP = ("placement hint: pack (fill the fullest hosts that fit first) or spread (the emptiest "
                         "first); omitted: the zone's or the fleet's default (docs/placement.md)")


class InstanceCreateInput(NetworkFieldsInput):
    """`name` becomes the guest hostname (a DNS label, <= 63 characters; checked by the service)."""

    placement_policy = serializers.ChoiceField(choices=["pack", "spread"], required=False,
                                               help_text=PLACEMENT_POLICY_HELP)

    sla_tier = serializers.CharField(
        max_length=32, required=False, default="", allow_blank=True,
        help_text="SLA tier code (GET /api/v1/sla-tiers/) it is bought at; default: the organization's default tier. "
                  "Its usage is priced and credited at that tier (400 unknown_sla_tier)")

    project = VisibleField(project_list_visible_to)
    name = serializers.CharField(max_length=255)
    flavor = VisibleField(flavor_list_visible_to)
    image = VisibleField(image_list_visible_to)
    ssh_keys = VisibleField(ssh_key_list_visible_to, many=True, required=False, default=list, max_length=32)
    user_data = serializers.CharField(required=False, default="", allow_blank=True, trim_whitespace=False,
                                      max_length=USER_DATA_MAX_BYTES * 4)
    queue = serializers.BooleanField(
        required=False, default=False,
        help_text="wait for capacity: when the fleet could hold the instance but not now, join the on-demand "
                  "queue (202) instead of answering 409 capacity_unavailable")
    volumes = InstanceVolumeInput(
        many=True, required=False, default=list, max_length=17,
        help_text="volumes to attach at create (at most 16 data volumes and one boot volume); an existing "
                  "host-local volume places the instance on its host")


class InstanceCheckInput(InstanceCreateInput):
    """The create's body for its dry run; `name` and `image` may be left out, so a client can ask whether a
    flavor can be placed as soon as it is chosen (the launch wizard's first step). Left out, the name's checks
    (format, 409 `name_taken`) and the image reference are not made; what is given is checked as the create
    checks it."""

    name = serializers.CharField(max_length=255, required=False, default="", allow_blank=True,
                                 help_text="omitted or empty: the name's checks are skipped")
    image = VisibleField(image_list_visible_to, required=False, allow_null=True, default=None,
                         help_text="omitted or null: the image reference is not checked")



class InstanceActionInput(Serializer):
    hard = serializers.BooleanField(default=False, help_text="power off / reset instead of an ACPI request")


class InstanceRebuildInput(Serializer):
    image = VisibleField(image_list_visible_to, required=False, allow_null=True, default=None,
                         help_text="the image to write (default: the instance's own)")


class InstanceResizeInput(Serializer):
    flavor = VisibleField(flavor_list_visible_to,
                          help_text="a flavor with the same GPU spec; the instance must be stopped")


class InstanceAccepted(Serializer):
    """202 body: the instance and the operation doing the work (also in the Location header)."""

    instance = InstanceOutput()
    operation = OperationOutput()


class ConsoleLogOutput(Serializer):
    log = serializers.CharField()


class ClusterOutput(ModelSerializer):
    project = serializers.UUIDField(source="project_id", read_only=True)
    flavor = serializers.UUIDField(source="flavor_id", read_only=True)
    image = serializers.UUIDField(source="image_id", read_only=True)
    members = serializers.SerializerMethodField()
    sla_tier = serializers.SerializerMethodField(help_text="SLA tier code it is bought at")

    class Meta:
        model = Cluster
        fields = ["id", "project", "name", "flavor", "image", "size", "status", "error_code", "error_reason",
                  "members", "sla_tier", "placement_policy", "topology", "created_at"]
        read_only_fields = fields

    def get_sla_tier(self, obj) -> str:
        return obj.sla_tier or obj.project.organization.default_sla_tier

    def get_members(self, obj) -> list[str]:
        return [str(m.pk) for m in obj.members.all()]


class ClusterTopologyInput(Serializer):
    """A cluster's topology constraint (the placement engine's `TopologyConstraint`); every limit is optional."""

    max_leaves_per_rail = serializers.IntegerField(
        min_value=1, max_value=1024, required=False,
        help_text="the most leaf switches the members' hosts may use on any rail (1: one leaf per rail)")
    max_spine_groups = serializers.IntegerField(min_value=1, max_value=1024, required=False,
                                                help_text="the most spine groups the members' leaves may span")
    max_nvlink_domains = serializers.IntegerField(
        min_value=1, max_value=1024, required=False,
        help_text="the most NVLink domains the members' hosts may span (1: one NVLink domain, e.g. one GB200 NVL72 "
                  "rack whose trays share a multi-node NVLink domain); hosts without one never qualify")


class ClusterCreateInput(NetworkFieldsInput):
    placement_policy = serializers.ChoiceField(choices=["pack", "spread"], required=False,
                                               help_text=PLACEMENT_POLICY_HELP)
    topology = ClusterTopologyInput(
        required=False,
        help_text="topology constraint on the members' hosts (always one InfiniBand fabric); one that no set of "
                  "the fleet's hosts could meet answers 400 topology_constraint_impossible with the reason")
    project = VisibleField(project_list_visible_to)
    name = serializers.CharField(max_length=255)
    flavor = VisibleField(flavor_list_visible_to)
    image = VisibleField(image_list_visible_to)
    size = serializers.IntegerField(min_value=1, max_value=256)
    sla_tier = serializers.CharField(
        max_length=32, required=False, default="", allow_blank=True,
        help_text="SLA tier code (GET /api/v1/sla-tiers/) it is bought at; default: the organization's default tier. "
                  "Its usage is priced and credited at that tier (400 unknown_sla_tier)")
    ssh_keys = VisibleField(ssh_key_list_visible_to, many=True, required=False, default=list, max_length=32)
    user_data = serializers.CharField(required=False, default="", allow_blank=True, trim_whitespace=False,
                                      max_length=USER_DATA_MAX_BYTES * 4)
    queue = serializers.BooleanField(
        required=False, default=False,
        help_text="wait for capacity: when the fleet could hold every member but not now, wait (all-or-nothing, "
                  "201) instead of answering 409 capacity_unavailable")
