"""Input/Output serializers of the health API."""

from rest_framework import serializers

from apps.core.references import VisibleField
from apps.core.serializers import Serializer
from apps.inventory.selectors import host_list_visible_to

from ..states import ConsentMode, EventKind, RmaOutcome


class _EventFields(Serializer):
    kind = serializers.ChoiceField(choices=EventKind.choices)
    xid = serializers.IntegerField(required=False, allow_null=True, min_value=0)
    gpu_index = serializers.IntegerField(required=False, allow_null=True, min_value=0)
    gpu_uuid = serializers.CharField(required=False, allow_blank=True, default="", max_length=64)
    hca_device = serializers.CharField(required=False, allow_blank=True, default="", max_length=32)
    hca_port_number = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    nvswitch = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=16,
        help_text="the NVSwitch's PCI address, kinds nvswitch_fatal / nvswitch_nonfatal (xid: the SXid number)",
    )
    nvswitch_port = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, help_text="the NVSwitch port (link) the SXid names"
    )
    count = serializers.IntegerField(required=False, default=1, min_value=1)
    observed_at = serializers.DateTimeField(required=False, allow_null=True)


class AgentHealthEventInput(_EventFields):
    dedup_key = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=128,
        help_text="the agent's key for this signal; a re-send with it is a no-op",
    )
    message = serializers.CharField(required=False, allow_blank=True, default="", max_length=500)


class AgentHealthEventOutput(Serializer):
    id = serializers.UUIDField()
    created = serializers.BooleanField()
    classification = serializers.CharField()
    classification_version = serializers.IntegerField()
    effects = serializers.ListField(child=serializers.CharField())
    applied = serializers.DictField()


class HealthPreviewInput(_EventFields):
    host = VisibleField(host_list_visible_to)


class RuleOutput(Serializer):
    id = serializers.CharField()
    kind = serializers.CharField()
    xid = serializers.IntegerField(allow_null=True)
    threshold = serializers.DictField(allow_null=True)
    # The wire name is `class` (a Python keyword, hence declared through the class namespace).
    vars()["class"] = serializers.CharField(help_text="the health class the row assigns, e.g. gpu_lost")
    effects = serializers.ListField(child=serializers.CharField())
    provider_at_fault = serializers.BooleanField()
    needs_return_to_service = serializers.BooleanField()
    source = serializers.CharField()


class ClassificationOutput(Serializer):
    version = serializers.IntegerField()
    rows = RuleOutput(many=True)


class HealthPreviewOutput(Serializer):
    classification_version = serializers.IntegerField()
    rule = RuleOutput()
    window_counts = serializers.DictField(child=serializers.IntegerField())
    actions = serializers.ListField(child=serializers.CharField(), help_text="what ingest would apply now")
    pending = serializers.ListField(
        child=serializers.CharField(), help_text="remediation hooks it would record"
    )


class HealthEventOutput(Serializer):
    """One of the caller's resources touched by a health event."""

    event = serializers.UUIDField(source="event_id")
    project = serializers.UUIDField(source="project_id")
    resource_type = serializers.CharField()
    resource_id = serializers.UUIDField()
    kind = serializers.CharField(source="event.kind")
    xid = serializers.IntegerField(source="event.xid", allow_null=True)
    count = serializers.IntegerField(source="event.count")
    observed_at = serializers.DateTimeField(source="event.observed_at")
    classification = serializers.CharField(source="event.classification")
    provider_at_fault = serializers.SerializerMethodField()

    def get_provider_at_fault(self, obj) -> bool:
        return "provider_at_fault" in (obj.event.effects or [])


class StaffHealthEventOutput(Serializer):
    """One fault signal as the provider's staff read it: where (host, GPU, port), what (kind, XID, message), when,
    what the classification made of it, what ingest did, and how many tenant resources it touched."""

    id = serializers.UUIDField()
    host = serializers.CharField(source="host.name")
    host_id = serializers.UUIDField()
    gpu_index = serializers.IntegerField(source="gpu.index", allow_null=True, default=None)
    hca_port = serializers.CharField(source="hca_port.device", allow_null=True, default=None,
                                     help_text="the InfiniBand port's device (mlx5_0), for port events")
    hca_port_number = serializers.IntegerField(source="hca_port.port_number", allow_null=True, default=None)
    nvswitch = serializers.CharField(help_text="the NVSwitch's PCI address, for NVSwitch events ('' otherwise)")
    nvswitch_port = serializers.IntegerField(allow_null=True, help_text="the NVSwitch port the SXid names")
    kind = serializers.CharField()
    xid = serializers.IntegerField(allow_null=True, help_text="the XID (kind xid) or SXid (kinds nvswitch_*)")
    count = serializers.IntegerField()
    observed_at = serializers.DateTimeField()
    source = serializers.CharField(help_text="agent | staff | control_plane")
    message = serializers.CharField()
    classification = serializers.CharField(help_text="the class of the rule that matched ('' when none did)")
    classification_version = serializers.IntegerField()
    effects = serializers.ListField(child=serializers.CharField(), help_text="the effects the matched rule names")
    actions = serializers.SerializerMethodField(help_text="what ingest applied (host_cordon, gpu_mark_faulty, ...)")
    pending = serializers.SerializerMethodField(help_text="repairs recorded for later (reset_gpu, rma, ...)")
    incident = serializers.SerializerMethodField(help_text="the incident ingest opened or found open, if any")
    needs_return_to_service = serializers.BooleanField()
    impact_count = serializers.IntegerField(help_text="tenant resources that held the device when it was observed")

    def get_actions(self, obj) -> list[str]:
        return list((obj.applied or {}).get("actions") or [])

    def get_pending(self, obj) -> list[str]:
        return list((obj.applied or {}).get("pending") or [])

    def get_incident(self, obj) -> str | None:
        return (obj.applied or {}).get("incident") or None


class RemediationOutput(Serializer):
    """One VM to move off a failed GPU or host (docs/health.md, "Remediation")."""

    id = serializers.UUIDField()
    project = serializers.UUIDField(source="project_id")
    resource_type = serializers.CharField()
    resource_id = serializers.UUIDField()
    event = serializers.UUIDField(source="event_id")
    classification = serializers.CharField(source="event.classification")
    consent_mode = serializers.CharField()
    status = serializers.CharField(
        help_text="notice | proposed | approved | running | succeeded | failed | held | cancelled"
    )
    reason = serializers.CharField()
    deadline_at = serializers.DateTimeField(
        allow_null=True, help_text="auto: when the VM moves (the checkpoint notice's deadline)"
    )
    approved_at = serializers.DateTimeField(allow_null=True)
    operation = serializers.UUIDField(
        source="operation_id", allow_null=True, help_text="the instance.recreate operation"
    )
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class RemediationPolicyInput(Serializer):
    consent_mode = serializers.ChoiceField(choices=ConsentMode.choices)
    notice_seconds = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=7 * 24 * 3600,
        help_text="checkpoint notice before an auto move",
    )


class RemediationPolicyOutput(Serializer):
    project = serializers.UUIDField()
    consent_mode = serializers.CharField()
    notice_seconds = serializers.IntegerField()


class ComponentIncidentOutput(Serializer):
    """The breaker of one leaf switch: open while `released_at` is null (docs/health.md, "The breaker")."""

    id = serializers.UUIDField()
    switch = serializers.CharField(source="switch.name")
    opened_at = serializers.DateTimeField()
    released_at = serializers.DateTimeField(allow_null=True)
    hosts = serializers.ListField(child=serializers.CharField())
    hosts_under = serializers.IntegerField()
    allowed = serializers.IntegerField()
    events_held = serializers.IntegerField()
    reason = serializers.CharField()


class RepairOutput(Serializer):
    """One repair (or acceptance) attempt of a GPU or host and its return-to-service check (docs/health.md,
    "Repair"). `result`: what the check answered ({tool, tool_version, driver_version, result, errors, warnings,
    exit_code, output_tail, passed}); `passed` only when the tool said pass and logged no error."""

    id = serializers.UUIDField()
    host = serializers.CharField(source="host.name")
    gpu_index = serializers.IntegerField(source="gpu.index", allow_null=True, default=None)
    event = serializers.UUIDField(source="event_id", allow_null=True)
    kind = serializers.CharField()
    action = serializers.CharField()
    status = serializers.CharField()
    attempt = serializers.IntegerField()
    result = serializers.JSONField()
    reason = serializers.CharField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class RmaOutput(Serializer):
    """An RMA record: the part (a GPU or the host), its serial and model, why, and its dates."""

    id = serializers.UUIDField()
    host = serializers.CharField(source="host.name")
    gpu_index = serializers.IntegerField(source="gpu.index", allow_null=True, default=None)
    part = serializers.CharField()
    serial = serializers.CharField()
    model = serializers.CharField()
    reason = serializers.CharField()
    failed_repairs = serializers.IntegerField()
    opened_at = serializers.DateTimeField()
    shipped_at = serializers.DateTimeField(allow_null=True)
    closed_at = serializers.DateTimeField(allow_null=True)
    outcome = serializers.CharField(help_text="replaced | repaired | rejected once closed, else empty")


class FenceOutput(Serializer):
    """A silent host's fencing (ADR 0218): the BMC's power-off and its read-back, or staff's confirmation."""

    id = serializers.UUIDField()
    host = serializers.CharField(source="host.name")
    host_id = serializers.UUIDField()
    event = serializers.UUIDField(source="event_id")
    status = serializers.CharField(help_text="pending | powering_off | confirmed | failed")
    method = serializers.CharField(help_text="bmc | manual once confirmed, else empty")
    reason = serializers.CharField()
    bmc_address = serializers.CharField()
    power_state = serializers.CharField(help_text="what the BMC read back last (on, off, ...), empty before")
    attempts = serializers.IntegerField(help_text="power-off requests sent")
    deadline_at = serializers.DateTimeField(allow_null=True, help_text="when an unconfirmed power-off fails")
    confirmed_at = serializers.DateTimeField(allow_null=True)
    confirmed_by = serializers.EmailField(source="confirmed_by.email", allow_null=True, default=None)
    created_at = serializers.DateTimeField()


class FenceConfirmInput(Serializer):
    # Not required here: `fence_confirm` refuses a missing or blank reason with 400 `reason_required`.
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True, default="",
                                   help_text="how staff found the host off (required: 400 `reason_required`)")


class RmaCloseInput(Serializer):
    outcome = serializers.ChoiceField(choices=RmaOutcome.choices)


class _Named(Serializer):
    id = serializers.UUIDField()
    slug = serializers.CharField()
    name = serializers.CharField()


class HostWorkloadOutput(Serializer):
    kind = serializers.CharField(help_text="instance | cluster_member | lease")
    id = serializers.UUIDField()
    name = serializers.CharField()
    status = serializers.CharField(help_text="the instance's or the lease's status")
    organization = _Named()
    project = _Named()
    gpus = serializers.ListField(child=serializers.IntegerField(), help_text="indexes of the host's GPUs it holds now")


class HostRemediationOutput(Serializer):
    id = serializers.UUIDField()
    instance = serializers.UUIDField()
    name = serializers.CharField(help_text="the instance's name")
    organization = _Named()
    status = serializers.CharField(
        help_text="notice | proposed | approved | running | succeeded | failed | held | cancelled")
    consent_mode = serializers.CharField()
    deadline_at = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField()
    to_host = serializers.CharField(allow_null=True, help_text="the host's name it moved to")
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class HostWorkloadsOutput(Serializer):
    """What runs on a host now and the VMs health moves (or moved) off it (docs/health.md, "Remediation")."""

    workloads = HostWorkloadOutput(many=True)
    remediations = HostRemediationOutput(many=True)
