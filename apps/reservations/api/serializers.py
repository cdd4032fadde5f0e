"""Input/output serializers of the reservations API. Ids in bodies resolve among what the caller can see
(`apps.core.references.VisibleField`; another tenant's id is "Not found.", a 400, ADR 0010)."""
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.compute.api.serializers import InstanceOutput
from apps.compute.selectors import flavor_list_visible_to, image_list_visible_to, ssh_key_list_visible_to
from apps.core.references import VisibleField
from apps.core.serializers import ModelSerializer, Serializer
from apps.operations.api.serializers import OperationOutput
from apps.tenancy.selectors import organization_list_visible_to, project_list_visible_to

from ..models import InstanceTerms, Lease, OnDemandReserve, QueuedRequest, QueuePriority, WebhookEndpoint
from ..selectors import lease_list_visible_to
from ..states import EndAction, Event, LeaseKind, Market


@extend_schema_field({"type": "string", "pattern": f"^({'|'.join(LeaseKind.values)})$",
                      "description": "hosts (whole hosts) | gpus | mig (GPU instances of a profile) | shares"})
class LeaseKindField(serializers.ChoiceField):
    def __init__(self, **kw):
        super().__init__(choices=LeaseKind.choices, **kw)


class LeaseOutput(ModelSerializer):
    project = serializers.UUIDField(source="project_id", read_only=True)
    kind = LeaseKindField(read_only=True)
    sla_tier = serializers.SerializerMethodField(help_text="SLA tier code the lease is bought at")

    class Meta:
        model = Lease
        fields = ["id", "project", "name", "status", "start", "end", "time_zone", "kind", "gpu_model", "count",
                  "mig_profile", "share_milli", "zone", "max_leaves_per_rail", "end_action", "notice_s", "reason",
                  "explanation", "confirmed_at", "activated_at", "ended_at", "sla_tier", "created_at", "updated_at"]
        read_only_fields = fields

    def get_sla_tier(self, obj) -> str:
        return obj.sla_tier or obj.project.organization.default_sla_tier


class LeaseCreateInput(Serializer):
    """`start`/`end`: 'YYYY-MM-DD HH:MM' in `time_zone`, ISO 8601 (an offset wins over `time_zone`), or 'now'."""

    project = VisibleField(project_list_visible_to)
    name = serializers.CharField(max_length=63)
    start = serializers.CharField(max_length=64)
    end = serializers.CharField(max_length=64)
    time_zone = serializers.CharField(max_length=64, default="UTC")
    kind = LeaseKindField()
    gpu_model = serializers.CharField(max_length=32)
    count = serializers.IntegerField(min_value=1)
    mig_profile = serializers.CharField(max_length=32, default="", allow_blank=True)
    share_milli = serializers.IntegerField(default=0, min_value=0)
    zone = serializers.CharField(max_length=63, default="", allow_blank=True)
    max_leaves_per_rail = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1)
    end_action = serializers.ChoiceField(choices=EndAction.choices, default=EndAction.STOP)
    notice_s = serializers.IntegerField(default=3600, min_value=0)
    sla_tier = serializers.CharField(
        max_length=32, required=False, default="", allow_blank=True,
        help_text="SLA tier code (GET /api/v1/sla-tiers/) the lease is bought at; default: the organization's "
                  "default tier. Its usage is priced and credited at that tier (400 unknown_sla_tier)")


class LeaseUpdateInput(Serializer):
    name = serializers.CharField(max_length=63, required=False)
    start = serializers.CharField(max_length=64, required=False)
    end = serializers.CharField(max_length=64, required=False)
    count = serializers.IntegerField(min_value=1, required=False)


class LeaseEndInput(Serializer):
    end = serializers.CharField(max_length=64)


class CapacityQuery(Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    step_s = serializers.IntegerField(default=3600, min_value=300)
    gpu_model = serializers.CharField(max_length=32, default="", allow_blank=True)
    zone = serializers.CharField(max_length=63, default="", allow_blank=True)


class CapacityProfile(Serializer):
    """Free fractional capacity of one MIG profile, vGPU type or share in a bucket (GPUs in that mode)."""

    form = serializers.ChoiceField(choices=["mig", "vgpu", "share"],
                                   help_text="mig (GPU instances of `profile`) | vgpu (vGPUs of type `profile`) | "
                                             "share (milli-GPU, `profile` empty)")
    profile = serializers.CharField(allow_blank=True, help_text="MIG profile or vGPU type name; empty for shares")
    gpus = serializers.IntegerField(help_text="healthy GPUs of the model in this mode on available hosts")
    free = serializers.IntegerField(help_text="units no lease or running on-demand work holds at any instant of "
                                              "the bucket: GPU instances of the profile (each profile alone), "
                                              "vGPUs of the type, or milli-GPU of shares")
    total = serializers.IntegerField(required=False, help_text="staff only: the same with nothing held")


class CapacityBucket(Serializer):
    """Free capacity in ``[start, end)``; the staff-only fields are absent for tenants."""

    gpu_model = serializers.CharField()
    zone = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    free_gpus = serializers.IntegerField()
    free_hosts = serializers.IntegerField()
    profiles = CapacityProfile(many=True, help_text="MIG profiles, vGPU types and shares of GPUs in those modes")
    total_gpus = serializers.IntegerField(required=False)
    leased_gpus = serializers.IntegerField(required=False)
    on_demand_gpus = serializers.IntegerField(required=False)
    spot_gpus = serializers.IntegerField(required=False)
    reserve_gpus = serializers.IntegerField(required=False)
    hosts = serializers.IntegerField(required=False)


class QueuedRequestOutput(ModelSerializer):
    project = serializers.UUIDField(source="project_id", read_only=True)
    instance = serializers.UUIDField(source="instance_id", read_only=True, allow_null=True,
                                     help_text="the waiting instance; null for a cluster")
    cluster = serializers.UUIDField(source="cluster_id", read_only=True, allow_null=True,
                                    help_text="the waiting cluster (one entry, placed all-or-nothing); null for an "
                                              "instance")
    position = serializers.SerializerMethodField()

    class Meta:
        model = QueuedRequest
        fields = ["id", "project", "instance", "cluster", "status", "position", "priority", "reason", "explanation",
                  "expires_at", "placed_at", "created_at", "updated_at"]
        read_only_fields = fields

    def get_position(self, obj) -> int | None:
        return (self.context.get("positions") or {}).get(obj.pk)


class InstanceCapacityOutput(ModelSerializer):
    """How the instance draws capacity; `queued_request` while/after it waited; `interruption_at` once a spot
    instance is chosen for preemption, with the reason."""

    instance = serializers.UUIDField(source="instance_id", read_only=True)
    lease = serializers.UUIDField(source="lease_id", read_only=True, allow_null=True)
    queued_request = serializers.SerializerMethodField()

    class Meta:
        model = InstanceTerms
        fields = ["instance", "market", "lease", "interruption_at", "interruption_reason", "preempted_at",
                  "queued_request"]
        read_only_fields = fields

    @extend_schema_field(QueuedRequestOutput(allow_null=True))
    def get_queued_request(self, obj):
        q = self.context.get("queued")
        return QueuedRequestOutput(q, context=self.context).data if q else None


class InstanceRequestInput(Serializer):
    project = VisibleField(project_list_visible_to)
    name = serializers.CharField(max_length=63)
    flavor = VisibleField(flavor_list_visible_to)
    image = VisibleField(image_list_visible_to)
    ssh_keys = VisibleField(ssh_key_list_visible_to, many=True, required=False, default=list, max_length=32)
    user_data = serializers.CharField(default="", allow_blank=True, trim_whitespace=False)
    market = serializers.ChoiceField(choices=Market.choices, default=Market.ON_DEMAND)
    lease = VisibleField(lease_list_visible_to, required=False, allow_null=True, default=None)
    queue_timeout_s = serializers.IntegerField(default=0, min_value=0,
                                               help_text="0: fail at once when no capacity; else wait up to this")


class InstanceRequestAccepted(Serializer):
    instance = InstanceOutput()
    operation = OperationOutput()
    capacity = InstanceCapacityOutput()


class WebhookEndpointOutput(ModelSerializer):
    organization = serializers.UUIDField(source="organization_id", read_only=True)

    class Meta:
        model = WebhookEndpoint
        fields = ["id", "organization", "url", "events", "is_active", "created_at"]
        read_only_fields = fields


class WebhookEndpointCreateInput(Serializer):
    organization = VisibleField(organization_list_visible_to)
    url = serializers.URLField(max_length=500)
    events = serializers.ListField(child=serializers.ChoiceField(choices=Event.choices), default=list)


class WebhookEndpointCreated(WebhookEndpointOutput):
    """Create answer: the signing `secret` is shown once."""

    class Meta(WebhookEndpointOutput.Meta):
        fields = [*WebhookEndpointOutput.Meta.fields, "secret"]
        read_only_fields = fields


class OnDemandReserveSerializer(ModelSerializer):
    """GPUs of `gpu_model` (in `zone`; empty = fleet-wide) kept free for on-demand work."""

    class Meta:
        model = OnDemandReserve
        fields = ["id", "gpu_model", "zone", "gpus", "updated_at"]
        read_only_fields = ["id", "updated_at"]
        validators = []  # create replaces the (gpu_model, zone) row


class QueuePrioritySerializer(ModelSerializer):
    project = VisibleField(project_list_visible_to)

    class Meta:
        model = QueuePriority
        fields = ["id", "project", "priority", "updated_at"]
        read_only_fields = ["id", "updated_at"]


class FragmentationRow(Serializer):
    gpu_model = serializers.CharField()
    zone = serializers.CharField()
    hosts = serializers.IntegerField(help_text="available hosts with GPUs of the model in exclusive mode")
    free_gpus = serializers.IntegerField(help_text="whole GPUs held by nothing (spot aside) now")
    fragmented_gpus = serializers.FloatField(help_text="of those, stranded for the typical requests (FGD's measure)")
    fragmentation_pct = serializers.FloatField(help_text="fragmented_gpus / free_gpus, in %")
    largest_free_block = serializers.IntegerField(help_text="the most free GPUs on one host")


class QueueFigures(Serializer):
    waiting = serializers.IntegerField()
    waiting_gpus = serializers.IntegerField(help_text="whole-GPU equivalents asked by the waiting requests")
    longest_wait_s = serializers.IntegerField(allow_null=True)
    median_wait_s = serializers.IntegerField(allow_null=True)
    window_s = serializers.IntegerField(help_text="the window of the placed and expired figures (24 h)")
    placed = serializers.IntegerField()
    placed_wait_p50_s = serializers.IntegerField(allow_null=True)
    placed_wait_max_s = serializers.IntegerField(allow_null=True)
    expired = serializers.IntegerField()


class GpuCountRow(Serializer):
    gpu_model = serializers.CharField()
    zone = serializers.CharField()
    total = serializers.IntegerField(help_text="GPUs of the model in the zone on hosts that are not retired")
    allocated = serializers.IntegerField(help_text="held by a live allocation now (healthy and scrubbed)")
    faulty = serializers.IntegerField(help_text="GPUs whose health is faulty")
    scrubbing = serializers.IntegerField(help_text="waiting for (or failed) their scrub after a tenant")
    out_of_service = serializers.IntegerField(help_text="on hosts that are not available (cordoned, draining, ...)")
    mig = serializers.IntegerField(help_text="in MIG mode")
    vgpu = serializers.IntegerField(help_text="in vGPU mode")


class FleetCapacityFigures(Serializer):
    generated_at = serializers.DateTimeField()
    gpus = GpuCountRow(many=True, help_text="the fleet's GPUs per model and zone, in the heat map's states")
    fragmentation = FragmentationRow(many=True)
    queue = QueueFigures()
