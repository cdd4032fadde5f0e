"""Input/Output serializers of the inventory API (staff only, except the GPU model catalog)."""
from rest_framework import serializers

from apps.core.references import VisibleField
from apps.core.serializers import ModelSerializer, Serializer
from apps.identity.permissions import IsStaffOperator, token_allows_write

from ..models import (
    AgentCommand,
    Fabric,
    Gpu,
    GpuInstance,
    HcaPort,
    Host,
    Incident,
    Rack,
    Region,
    ScalableUnit,
    SubnetManager,
    Switch,
    Zone,
)
from ..selectors import host_list_visible_to
from ..states import CommandKind, host_actions_from


class RegionOutput(ModelSerializer):
    class Meta:
        model = Region
        fields = ["id", "name", "description", "created_at"]


class ZoneOutput(ModelSerializer):
    region = serializers.CharField(source="region.name")

    class Meta:
        model = Zone
        fields = ["id", "name", "region", "description", "created_at"]


class ScalableUnitOutput(ModelSerializer):
    zone = serializers.CharField(source="zone.name")

    class Meta:
        model = ScalableUnit
        fields = ["id", "name", "zone", "created_at"]


class RackOutput(ModelSerializer):
    zone = serializers.CharField(source="zone.name")
    scalable_unit = serializers.CharField(source="scalable_unit.name", allow_null=True, default=None)

    class Meta:
        model = Rack
        fields = ["id", "name", "zone", "scalable_unit", "created_at"]


class SubnetManagerOutput(ModelSerializer):
    class Meta:
        model = SubnetManager
        fields = ["name", "role", "priority", "address", "port_guid"]


class FabricOutput(ModelSerializer):
    region = serializers.CharField(source="region.name")
    kind = serializers.CharField(help_text="infiniband | ethernet")
    subnet_managers = SubnetManagerOutput(many=True)

    class Meta:
        model = Fabric
        fields = ["id", "name", "kind", "region", "purpose", "description", "subnet_managers", "created_at"]


class SwitchOutput(ModelSerializer):
    fabric = serializers.CharField(source="fabric.name")
    zone = serializers.CharField(source="zone.name", allow_null=True, default=None)
    scalable_unit = serializers.CharField(source="scalable_unit.name", allow_null=True, default=None)
    rack = serializers.CharField(source="rack.name", allow_null=True, default=None)

    class Meta:
        model = Switch
        fields = ["id", "name", "fabric", "role", "zone", "scalable_unit", "rack", "rail", "model", "port_count",
                  "node_guid", "created_at"]


class HostOutput(ModelSerializer):
    zone = serializers.CharField(source="zone.name")
    scalable_unit = serializers.CharField(source="scalable_unit.name", allow_null=True, default=None)
    rack = serializers.CharField(source="rack.name", allow_null=True, default=None)
    allowed_actions = serializers.SerializerMethodField(help_text=(
        "the host actions (`POST /hosts/{id}/<action>/`) the caller may take now: those whose transition starts "
        "from the current state, for an operator with a write-scoped credential; empty for other staff roles"))

    class Meta:
        model = Host
        fields = ["id", "name", "zone", "scalable_unit", "rack", "rack_unit", "vendor", "model", "serial",
                  "bmc_address", "bmc_credentials_ref", "cpu_sockets", "cpu_cores", "cpu_threads", "memory_mib",
                  "numa_nodes", "provisioning_kind", "libvirt_uri", "nvswitch_system", "driver_version", "state",
                  "state_reason", "state_changed_at", "spare", "active_partitions", "last_heartbeat_at", "agent_version",
                  "allowed_actions", "created_at", "updated_at"]

    def get_allowed_actions(self, host) -> list[str]:
        request = self.context.get("request")
        user = getattr(request, "user", None)
        if request is None or getattr(user, "staff_role", "") not in IsStaffOperator.write_roles:
            return []
        return host_actions_from(host.state) if token_allows_write(request) else []


class HostActionInput(Serializer):
    reason = serializers.CharField(max_length=500)
    provider_at_fault = serializers.BooleanField(default=True, help_text="mark-faulty only: counts as SLA downtime")
    at = serializers.DateTimeField(required=False, help_text=(
        "When the condition took effect (RFC 3339, with offset); default now. Not in the future, not before the "
        "host's last condition change. Lets staff record a fault noticed after the fact."))


class HostSpareInput(Serializer):
    spare = serializers.BooleanField(help_text="true: into the spare pool (held out of placement); false: back out")
    # Not required here: `host_spare_set` refuses a missing or blank reason with 400 `reason_required`.
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True, default="",
                                   help_text="why (required: 400 `reason_required`)")


class IncidentUpdateInput(Serializer):
    start = serializers.DateTimeField(required=False, help_text="When the fault began (RFC 3339, with offset).")
    end = serializers.DateTimeField(required=False, help_text=(
        "A closed incident's end; an open one ends when its host or GPU is marked available."))
    reason = serializers.CharField(max_length=500, required=False)
    provider_at_fault = serializers.BooleanField(required=False, help_text="Counts as SLA downtime when true.")


class GpuInstanceOutput(ModelSerializer):
    class Meta:
        model = GpuInstance
        fields = ["profile_id", "profile", "start", "size", "gi_id"]


class GpuOutput(ModelSerializer):
    host = serializers.CharField(source="host.name")
    gpu_instances = GpuInstanceOutput(many=True)

    class Meta:
        model = Gpu
        fields = ["id", "host", "index", "model", "uuid", "serial", "pci_address", "numa_node", "nvlink_domain",
                  "mode", "health", "scrub_state", "scrub_reason", "scrub_commands", "scrub_changed_at",
                  "gpu_instances", "observed", "created_at", "updated_at"]


class GpuScrubInput(Serializer):
    reason = serializers.CharField(max_length=500, help_text="What was fixed before the scrub is queued again.")


class GpuActionInput(Serializer):
    reason = serializers.CharField(max_length=500)
    provider_at_fault = serializers.BooleanField(default=True)
    at = serializers.DateTimeField(required=False, help_text="When it took effect (default now; not in the future).")


class HcaPortOutput(ModelSerializer):
    host = serializers.CharField(source="host.name")
    fabric = serializers.CharField(source="fabric.name")
    leaf_switch = serializers.CharField(source="leaf_switch.name", allow_null=True, default=None)

    class Meta:
        model = HcaPort
        fields = ["id", "host", "device", "port_number", "port_guid", "lid", "fabric", "rail", "leaf_switch",
                  "leaf_port", "rate_gbps", "pci_address", "numa_node", "max_vfs", "created_at"]


class IncidentOutput(ModelSerializer):
    host = serializers.CharField(source="host.name")
    gpu_index = serializers.IntegerField(source="gpu.index", allow_null=True, default=None)
    duration_s = serializers.SerializerMethodField()

    class Meta:
        model = Incident
        fields = ["id", "host", "gpu", "gpu_index", "start", "end", "duration_s", "reason", "provider_at_fault"]

    def get_duration_s(self, obj) -> int | None:
        return None if obj.end is None else int((obj.end - obj.start).total_seconds())


# --- GPU model catalog -------------------------------------------------------------------------------------
class MigProfileOutput(Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    compute = serializers.IntegerField(help_text="compute slices of 7")
    memory = serializers.IntegerField(help_text="memory slices of 8")
    starts = serializers.ListField(child=serializers.IntegerField(), help_text="allowed start memory slices")
    max = serializers.IntegerField(help_text="maximum instances per GPU")
    media = serializers.BooleanField(help_text="+me media-extension profile")


class VgpuTypeOutput(Serializer):
    name = serializers.CharField()
    framebuffer_mib = serializers.IntegerField()
    max = serializers.IntegerField(help_text="maximum per GPU")
    kind = serializers.CharField(help_text="time_sliced | mig_backed")
    mig_profile = serializers.IntegerField(allow_null=True)


class NvswitchPartitionOutput(Serializer):
    id = serializers.IntegerField()
    gpus = serializers.ListField(child=serializers.IntegerField(), help_text="Fabric Manager GPU physical ids")


class GpuModelOutput(Serializer):
    key = serializers.CharField()
    name = serializers.CharField()
    architecture = serializers.CharField()
    memory_gb = serializers.IntegerField()
    memory_mib = serializers.IntegerField()
    form_factor = serializers.CharField()
    pcie_generation = serializers.IntegerField()
    pcie_width = serializers.IntegerField()
    nvlink = serializers.DictField(allow_null=True)
    nvswitch_system = serializers.CharField()
    nvswitch_partitions = NvswitchPartitionOutput(many=True)
    sriov_vfs = serializers.IntegerField()
    mig_profiles = MigProfileOutput(many=True)
    vgpu_backing = serializers.CharField(help_text="mdev | sriov_vf")
    vgpu_types = VgpuTypeOutput(many=True)
    sources = serializers.DictField(help_text="cite key -> {title, url}")


# --- fleet -----------------------------------------------------------------------------------------------------
class FleetImportInput(Serializer):
    document = serializers.CharField(help_text="fleet YAML (docs/fleet-format.md)", trim_whitespace=False)
    dry_run = serializers.BooleanField(default=True, help_text="only validate and diff; false applies")


class FleetImportOutput(Serializer):
    dry_run = serializers.BooleanField()
    applied = serializers.BooleanField()
    changes = serializers.ListField(child=serializers.CharField(), help_text="+ created, ~ updated (field: old -> new)")
    summary = serializers.DictField()


class FleetExportOutput(Serializer):
    document = serializers.CharField(help_text="fleet YAML, explicit form")


# --- agent -----------------------------------------------------------------------------------------------------
class EnrollmentTokenInput(Serializer):
    ttl_s = serializers.IntegerField(default=3600, min_value=60, max_value=7 * 86400)


class EnrollmentTokenOutput(Serializer):
    host = serializers.CharField()
    token = serializers.CharField(help_text="shown once")
    expires_at = serializers.DateTimeField()


class AgentCommandOutput(ModelSerializer):
    host = serializers.CharField(source="host.name")

    class Meta:
        model = AgentCommand
        fields = ["id", "host", "kind", "payload", "status", "result", "error", "created_at", "dispatched_at",
                  "completed_at"]


class AgentCommandInput(Serializer):
    host = VisibleField(host_list_visible_to)
    kind = serializers.ChoiceField(choices=CommandKind.choices)
    payload = serializers.DictField(default=dict, help_text="gpu_index, layout | profile, start | partition_id")


class AgentEnrollInput(Serializer):
    token = serializers.CharField()
    inventory = serializers.DictField(default=dict)
    agent_version = serializers.CharField(max_length=32, default="", allow_blank=True)


class AgentEnrollOutput(Serializer):
    host_id = serializers.UUIDField()
    host = serializers.CharField()
    credential = serializers.CharField(help_text="send as `Authorization: Agent <credential>`; shown once")


class AgentHeartbeatInput(Serializer):
    inventory = serializers.DictField(required=False)
    agent_version = serializers.CharField(max_length=32, default="", allow_blank=True)


class AgentHeartbeatOutput(Serializer):
    host = serializers.CharField()
    state = serializers.CharField()
    pending_commands = serializers.IntegerField()


class AgentCommandResultInput(Serializer):
    succeeded = serializers.BooleanField()
    result = serializers.DictField(default=dict)
    error = serializers.CharField(default="", allow_blank=True, max_length=500)
