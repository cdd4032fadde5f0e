"""Input/output serializers of the scheduling API (staff only): the placement dry run and the ledger."""
from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from apps.core.references import VisibleField
from apps.core.serializers import ModelSerializer, Serializer
from apps.tenancy.selectors import project_list_visible_to

from ..models import Allocation, ConsumerType
from ..placement.request import MAX_MEMORY_MIB, MAX_VCPUS, POLICIES


class TopologyInput(Serializer):
    max_leaves_per_rail = serializers.IntegerField(min_value=1, required=False, allow_null=True,
                                                   help_text="1 = the same leaf on every rail")
    max_spine_groups = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    max_nvlink_domains = serializers.IntegerField(
        min_value=1, required=False, allow_null=True,
        help_text="the most NVLink domains (inventory GPUs' nvlink_domain) the hosts may span; 1 = one NVLink domain")
    one_fabric = serializers.BooleanField(required=False, default=False)


class PlacementRequestInput(Serializer):
    """A `PlacementRequest`. One GPU form per host: gpus_per_host | mig_profile | vgpu_type | share_milli."""

    project = VisibleField(project_list_visible_to,
                           help_text="the project the request is for (tenant isolation, affinity)")
    gpu_models = serializers.ListField(child=serializers.CharField(max_length=32), required=False, default=list,
                                       help_text="allowed catalog keys, e.g. H100-SXM5-80GB; empty = any")
    gpus_per_host = serializers.IntegerField(min_value=0, max_value=16, required=False, default=0)
    mig_profile = serializers.CharField(max_length=32, required=False, default="", allow_blank=True)
    vgpu_type = serializers.CharField(max_length=32, required=False, default="", allow_blank=True)
    share_milli = serializers.IntegerField(min_value=1, max_value=999, required=False,
                                           help_text="milli-GPU of one shared GPU, 1..999; omit for no share")
    vcpus = serializers.IntegerField(min_value=0, max_value=MAX_VCPUS, required=False, default=0)
    memory_mib = serializers.IntegerField(min_value=0, max_value=MAX_MEMORY_MIB, required=False, default=0)
    hosts = serializers.IntegerField(min_value=1, max_value=4096, required=False, default=1)
    zone = serializers.CharField(max_length=63, required=False, default="", allow_blank=True)
    provisioning_kind = serializers.ChoiceField(choices=["", "hypervisor", "baremetal"], required=False, default="")
    policy = serializers.ChoiceField(choices=["", *POLICIES], required=False, default="")
    affinity_group = serializers.CharField(max_length=100, required=False, default="", allow_blank=True)
    anti_affinity = serializers.BooleanField(required=False, default=False)
    dedicated = serializers.BooleanField(required=False, default=False)
    lease = VisibleField("apps.reservations.selectors.lease_list_visible_to", required=False, allow_null=True,
                         default=None)
    spot = serializers.BooleanField(required=False, default=False)
    consumer_type = serializers.ChoiceField(choices=ConsumerType.choices, required=False,
                                            default=ConsumerType.INSTANCE)
    start = serializers.DateTimeField(required=False, allow_null=True, default=None)
    end = serializers.DateTimeField(required=False, allow_null=True, default=None)
    topology = TopologyInput(required=False)
    limit = serializers.IntegerField(min_value=1, max_value=50, required=False, default=5)


class ResourceOutput(Serializer):
    resource_class = serializers.CharField()
    gpu_id = serializers.UUIDField(allow_null=True)
    slices = serializers.ListField(child=serializers.IntegerField(), allow_null=True)
    amount = serializers.IntegerField()
    profile = serializers.CharField()


class HostChoiceOutput(Serializer):
    host_id = serializers.UUIDField()
    host = serializers.CharField()
    gpu_indexes = serializers.ListField(child=serializers.IntegerField(), required=False)
    nvswitch_partition = serializers.IntegerField(required=False)
    numa_nodes = serializers.ListField(child=serializers.IntegerField(), required=False)
    resources = ResourceOutput(many=True)


class CandidateOutput(Serializer):
    score = serializers.FloatField()
    topology = serializers.DictField(help_text="max_leaves_per_rail, spine_groups, fabrics (multi-host)")
    hosts = HostChoiceOutput(many=True)


class FilterOutput(Serializer):
    filter = serializers.CharField()
    removed = serializers.IntegerField()
    reasons = serializers.DictField(child=serializers.IntegerField())
    note = serializers.CharField(required=False)


class ExplanationOutput(Serializer):
    hosts_considered = serializers.IntegerField()
    path = serializers.CharField()
    filters = FilterOutput(many=True)
    remaining = serializers.IntegerField()
    evaluated = serializers.IntegerField(required=False)
    topology = serializers.DictField(required=False)


class PlacementCandidatesOutput(Serializer):
    placeable = serializers.BooleanField()
    code = serializers.CharField(allow_null=True, help_text="capacity_unavailable when nothing can hold it")
    candidates = CandidateOutput(many=True)
    explanation = ExplanationOutput()


class AllocationOutput(ModelSerializer):
    consumer = serializers.UUIDField(source="consumer_id")
    project = serializers.UUIDField(source="project_id")
    host = serializers.UUIDField(source="host_id")
    gpu = serializers.UUIDField(source="gpu_id", allow_null=True)
    parent = serializers.UUIDField(source="parent_id", allow_null=True)
    slices = serializers.SerializerMethodField()
    start = serializers.DateTimeField(source="period.lower")
    end = serializers.DateTimeField(source="period.upper", allow_null=True)

    class Meta:
        model = Allocation
        fields = ["id", "consumer", "consumer_type", "project", "host", "gpu", "resource_class", "slices", "amount",
                  "profile", "start", "end", "parent", "spot", "created_at"]

    def get_slices(self, obj) -> list[int] | None:
        return [obj.slices.lower, obj.slices.upper] if obj.slices else None


#: The placement rule's refusals (docs/adr/0404-placement-admission.md), documented on every create it guards.
PLACEMENT_RULE_RESPONSES = {
    409: OpenApiResponse(description="capacity_unavailable: the fleet could hold the request but not now; "
                                     "`earliest_start` says when it would fit (null when unknown); inside a "
                                     "lease (`lease` names it): the lease has no room for it now. Also "
                                     "name_taken (the name is used in the project), lease_not_usable (the lease "
                                     "named is not active), invalid_state (the object it refers to is in a "
                                     "state that does not allow it), not_supported_for_flavor_kind (instances and "
                                     "clusters: the flavor's kind cannot run it)."),
    422: OpenApiResponse(description="quota_exceeded, or unplaceable: no capacity of the fleet could ever hold the "
                                     "request (`reason`, `explanation`); idempotency_key_reused."),
}


# ---- launch checks (docs/adr/0405-launch-checks.md) -----------------------------------------------------------
class CheckQueueOutput(Serializer):
    would_queue = serializers.BooleanField(
        help_text="the create as sent would wait (queue: true and no capacity now) instead of being placed")
    position = serializers.IntegerField(
        allow_null=True, min_value=1,
        help_text="the 1-based place a new request would take in the on-demand queue now (instances that cannot "
                  "be placed now); null when it fits now, or for clusters and leases (they do not use the queue)")


class CheckQuotaLine(Serializer):
    resource = serializers.CharField(help_text="quota key, e.g. gpus:H100-SXM5-80GB, vcpus, leases")
    scope = serializers.CharField(help_text="project | organization")
    limit = serializers.IntegerField()
    used = serializers.IntegerField(help_text="held now (the same counter the create checks)")
    requested = serializers.IntegerField(help_text="what the create would add")
    exceeded = serializers.BooleanField(help_text="used + requested > limit: the create answers quota_exceeded")


class CheckPriceOutput(Serializer):
    currency = serializers.CharField(help_text="ISO 4217: the organization's billing currency")
    sla_tier = serializers.CharField(help_text="the organization's default SLA tier")
    pricing_model = serializers.CharField(help_text="on_demand | spot | reserved")
    sku = serializers.CharField(help_text="the SKU usage would be rated at (docs/billing.md)")
    unit = serializers.CharField(allow_null=True, help_text="hour | month; null when no price book prices it")
    unit_price = serializers.CharField(allow_null=True, help_text="decimal string per unit")
    units = serializers.CharField(help_text="decimal string: how many units are held (members, GPUs)")
    per_hour = serializers.CharField(allow_null=True,
                                     help_text="decimal string: unit_price × units per hour (a monthly price over "
                                               "730.5 hours); null when unpriced")
    hours = serializers.CharField(allow_null=True, help_text="decimal string: the known duration (a lease window)")
    estimate_total = serializers.CharField(
        allow_null=True, help_text="decimal string: per_hour × hours rounded to the currency's minor unit; null "
                                   "without a known duration. An estimate: invoices also apply increments, "
                                   "minimums and downtime credits")


class PlacementCheckOutput(Serializer):
    """The answer of a launch check (`POST /instances/check/`, `/clusters/check/`, `/leases/check/`): what the
    create with the same body would do, computed by the create's own code and rolled back. When the create would
    refuse with a code other than the placement rule's, the answer also carries the members of that refusal's
    problem body (for example `instances` of `volume_in_use`, `volume` of `volume_not_bootable`,
    `current_state` / `allowed_states` of `invalid_state`, `resource` / `limit` / `usage` / `requested` of
    `quota_exceeded`)."""

    placeable = serializers.BooleanField(help_text="the create would be placed right now")
    code = serializers.CharField(allow_null=True,
                                 help_text="the error code the create would answer (quota_exceeded, unplaceable, "
                                           "capacity_unavailable, name_taken, ...); null when it would be accepted")
    detail = serializers.CharField(allow_null=True, help_text="the create's error detail, or why it would wait")
    reason = serializers.CharField(allow_null=True,
                                   help_text="the constraint that failed: unplaceable's reason, capacity's "
                                             "constraint, or the quota key")
    explanation = serializers.JSONField(
        allow_null=True, help_text="the placement rule's explanation (hosts considered, what each filter removed, "
                                   "topology, MIG geometry), as in the create's 409/422 body")
    earliest_start = serializers.DateTimeField(
        allow_null=True, help_text="the first instant it would fit (capacity calendar: ends of allocations with a "
                                   "known end); null when it fits now or nothing known ends. Requests ahead in "
                                   "the on-demand queue may take that capacity first")
    start = serializers.DateTimeField(
        allow_null=True, help_text="leases: the start the create would confirm - the asked start, or now + the spot "
                                   "notice (RESERVATIONS_SPOT_GRACE_S) when spot instances run on the GPUs it "
                                   "would claim (docs/adr/0801-on-demand-queue-and-spot.md); null when the create "
                                   "would refuse, and for instances and clusters (they start when placed)")
    queue = CheckQueueOutput()
    quota = CheckQuotaLine(many=True)
    price = CheckPriceOutput(allow_null=True)

    def to_representation(self, instance):
        """The declared fields, then the refusal's own members (`check_answer`): the create's problem body's."""
        data = super().to_representation(instance)
        for key, value in instance.items():
            data.setdefault(key, value)
        return data


# --- the fleet heat map (GET /fleet/summary) --------------------------------------------------------------------
class FleetGpuOutput(Serializer):
    index = serializers.IntegerField()
    state = serializers.ChoiceField(choices=["faulty", "scrub_failed", "dirty", "allocated", "free"], help_text=(
        "the first that holds: health faulty, scrub failed, scrub pending (dirty), held by a live allocation, free"))
    mode = serializers.CharField(help_text="exclusive | mig | vgpu | shared")
    health = serializers.CharField()
    mig = serializers.CharField(help_text="its MIG GPU instances, e.g. `3g.40gb×2`; empty when none")


class FleetHostOutput(Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    rack_unit = serializers.IntegerField(allow_null=True)
    condition = serializers.CharField(help_text="the host's state: available, cordoned, draining, maintenance, ...")
    condition_reason = serializers.CharField()
    condition_changed_at = serializers.DateTimeField(allow_null=True)
    last_heartbeat_at = serializers.DateTimeField(allow_null=True, help_text="the node agent's last heartbeat")
    agent_version = serializers.CharField()
    provisioning_kind = serializers.CharField()
    spare = serializers.BooleanField(help_text="in the provider's spare pool (held out of placement until a lease "
                                               "needs a replacement host)")
    gpu_model = serializers.CharField(allow_null=True, help_text="its GPUs' model (`A/B` when mixed)")
    mig = serializers.CharField(help_text="the MIG GPU instances of all its GPUs, e.g. `3g.40gb×16`")
    gpus = FleetGpuOutput(many=True)


class FleetRackOutput(Serializer):
    name = serializers.CharField(allow_null=True, help_text="null: the zone's hosts without a rack")
    hosts = FleetHostOutput(many=True)


class FleetZoneOutput(Serializer):
    name = serializers.CharField()
    racks = FleetRackOutput(many=True)


class FleetRegionOutput(Serializer):
    name = serializers.CharField()
    zones = FleetZoneOutput(many=True)


class FleetSummaryOutput(Serializer):
    generated_at = serializers.DateTimeField()
    host_count = serializers.IntegerField(help_text="hosts that are not retired")
    gpu_count = serializers.IntegerField()
    gpu_states = serializers.DictField(child=serializers.IntegerField(), help_text="GPUs per heat-map state")
    host_conditions = serializers.DictField(child=serializers.IntegerField(), help_text="hosts per condition")
    gpu_models = serializers.ListField(child=serializers.CharField())
    regions = FleetRegionOutput(many=True)
