"""Staff inventory API, the GPU model catalog, fleet import/export and the node-agent endpoints.

Views parse, authorize, call one service or selector, and format. Regions and zones are read by any
authenticated caller (name, description: nothing internal). Other staff endpoints use `IsStaffOperator` (any staff
role reads, operators write); tenants get 403 and never see hosts or serials. Agent endpoints authenticate with
`Authorization: Agent <credential>` (see `services.agent`).
"""
from collections.abc import Mapping

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, mixins, parsers, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api import ApiViewMixin
from apps.core.errors import NotFound, ValidationFailed
from apps.core.schema import problems
from apps.identity.permissions import IsStaffOperator

from .. import selectors
from ..authentication import AgentAuthentication, IsAgent
from ..catalog import gpu_model_get as catalog_get
from ..catalog import gpu_model_list as catalog_list
from ..catalog import load_sources, nvswitch_partitions
from ..fleet.export import fleet_export_yaml
from ..services import agent as agent_services
from ..services import hosts as host_services
from ..services import scrub as scrub_services
from ..services.fleet import fleet_import
from . import filters
from . import schema as _schema  # noqa: F401  (registers the agent auth scheme)
from . import serializers as s


class _StaffReadOnly(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    permission_classes = [IsStaffOperator]
    selector = None

    def get_queryset(self):
        return type(self).selector(self.request.user)


class _CatalogReadOnly(_StaffReadOnly):
    permission_classes = [permissions.IsAuthenticated]


class RegionViewSet(_CatalogReadOnly):
    """Regions: any authenticated caller reads them (read scope is enough); the fleet import writes them."""

    serializer_class = s.RegionOutput
    selector = staticmethod(selectors.region_list_visible_to)


class ZoneViewSet(_CatalogReadOnly):
    """Zones (failure domains) of the regions: any authenticated caller reads them; the fleet import writes them."""

    serializer_class = s.ZoneOutput
    filterset_class = filters.ZoneFilter
    selector = staticmethod(selectors.zone_list_visible_to)


class ScalableUnitViewSet(_StaffReadOnly):
    """Scalable units: blocks of hosts sharing leaf switches (staff)."""

    serializer_class = s.ScalableUnitOutput
    filterset_class = filters.ScalableUnitFilter
    selector = staticmethod(selectors.scalable_unit_list_visible_to)


class RackViewSet(_StaffReadOnly):
    """Racks: positions of hosts and switches in a zone (staff)."""

    serializer_class = s.RackOutput
    filterset_class = filters.RackFilter
    selector = staticmethod(selectors.rack_list_visible_to)


class FabricViewSet(_StaffReadOnly):
    """InfiniBand and Ethernet fabrics with their subnet managers (staff)."""

    serializer_class = s.FabricOutput
    filterset_class = filters.FabricFilter
    selector = staticmethod(selectors.fabric_list_visible_to)


class SwitchViewSet(_StaffReadOnly):
    """Leaf, spine and core switches of the fabrics (staff)."""

    serializer_class = s.SwitchOutput
    filterset_class = filters.SwitchFilter
    selector = staticmethod(selectors.switch_list_visible_to)


class HcaPortViewSet(_StaffReadOnly):
    """InfiniBand HCA ports of hosts, with their GUIDs and rails (staff)."""

    serializer_class = s.HcaPortOutput
    filterset_class = filters.HcaPortFilter
    selector = staticmethod(selectors.hca_port_list_visible_to)


class IncidentViewSet(_StaffReadOnly):
    """Faulty periods of hosts and GPUs (billing reads provider-at-fault ones as SLA downtime). Opened and closed
    through the host's and GPU's condition actions; operators correct one with PATCH."""

    serializer_class = s.IncidentOutput
    filterset_class = filters.IncidentFilter
    selector = staticmethod(selectors.incident_list_visible_to)

    @extend_schema(request=s.IncidentUpdateInput, responses={200: s.IncidentOutput, **problems({
        400: "invalid_time: a naive or future time, a start not before the end, or a start before the end of the "
             "same host's (or GPU's) previous incident; validation_error: an empty reason.",
        403: "permission_denied: only operators change incidents.",
        409: "incident_open: an end for an open incident (it ends when its host or GPU is marked available); "
             "incident_already_credited (with `invoices`): a change of start, end or provider fault once the "
             "downtime is billed on a finalized or paid invoice (issue a credit note instead). While it is billed "
             "on drafts only, a change re-rates them."})},
        summary="Correct an incident's times, reason or provider fault (audited)")
    def partial_update(self, request, pk=None):
        inc = host_services.incident_update(actor=request.user, incident=self.get_object(),
                                            **self._input(s.IncidentUpdateInput))
        return self._out(self.get_queryset().get(pk=inc.pk))


def _condition_action(name: str, service, doc: str, input_cls, output_cls, target: str):
    """A detail POST action `name` that validates `input_cls`, calls `service(actor=..., <target>=obj, ...)` and
    answers `output_cls`; `provider_at_fault` is only passed to mark-faulty."""

    def handler(self, request, pk=None):
        kwargs = dict(self._input(input_cls))
        if name != "mark-faulty":
            kwargs.pop("provider_at_fault", None)
        obj = service(actor=request.user, **{target: self.get_object()}, **kwargs)
        return self._out(self.get_queryset().get(pk=obj.pk), cls=output_cls)

    handler.__name__ = name.replace("-", "_")
    # the schema goes on after `action`, which replaces the function's `kwargs` where drf-spectacular keeps it
    # (applied before, the body was documented as the viewset's HostOutput)
    return extend_schema(request=input_cls, responses=output_cls, summary=doc)(
        action(detail=True, methods=["post"], url_path=name)(handler))


def _host_action(name: str, service, doc: str):
    return _condition_action(name, service, doc, s.HostActionInput, s.HostOutput, "host")


class HostViewSet(_StaffReadOnly):
    """Hosts and their conditions. Each action takes a `reason`, is audited, and is a 409 from a wrong state."""

    serializer_class = s.HostOutput
    filterset_class = filters.HostFilter
    selector = staticmethod(selectors.host_list_visible_to)

    cordon = _host_action("cordon", host_services.host_cordon, "Cordon: no new placements")
    drain = _host_action("drain", host_services.host_drain, "Drain: cordon, then move or stop workloads")
    maintenance = _host_action("maintenance", host_services.host_maintenance, "Put the host in maintenance")
    mark_faulty = _host_action("mark-faulty", host_services.host_mark_faulty, "Mark faulty (opens an incident)")
    mark_available = _host_action("mark-available", host_services.host_mark_available,
                                  "Back to available (closes an open incident)")
    retire = _host_action("retire", host_services.host_retire, "Retire the host (terminal)")

    @extend_schema(request=s.HostSpareInput, responses={200: s.HostOutput, **problems({
        400: "reason_required: no reason (or a blank one); validation_error: no `spare`.",
        409: "host_retired: a retired host cannot go into the spare pool."})},
        summary="Put the host in the spare pool or take it out (audited; spares take no new placement)")
    @action(detail=True, methods=["post"], url_path="spare")
    def spare(self, request, pk=None):
        host = host_services.host_spare_set(actor=request.user, host=self.get_object(),
                                            **self._input(s.HostSpareInput))
        return self._out(self.get_queryset().get(pk=host.pk))

    @extend_schema(request=s.EnrollmentTokenInput, responses={201: s.EnrollmentTokenOutput},
                   summary="Create a one-time agent enrollment token (shown once)")
    @action(detail=True, methods=["post"], url_path="enrollment-token")
    def enrollment_token(self, request, pk=None):
        host = self.get_object()
        token, clear = agent_services.enrollment_token_create(actor=request.user, host=host,
                                                              **self._input(s.EnrollmentTokenInput))
        return Response({"host": host.name, "token": clear, "expires_at": token.expires_at},
                        status=status.HTTP_201_CREATED)


def _gpu_action(name: str, service, doc: str):
    return _condition_action(name, service, doc, s.GpuActionInput, s.GpuOutput, "gpu")


class GpuViewSet(_StaffReadOnly):
    """GPUs with their MIG GPU instances (staff)."""

    serializer_class = s.GpuOutput
    filterset_class = filters.GpuFilter
    selector = staticmethod(selectors.gpu_list_visible_to)

    mark_faulty = _gpu_action("mark-faulty", host_services.gpu_mark_faulty, "Mark one GPU faulty (incident)")
    mark_healthy = _gpu_action("mark-healthy", host_services.gpu_mark_healthy, "Mark a GPU healthy again")
    scrub = _condition_action("scrub", scrub_services.gpu_scrub_retry,
                              "Queue a failed scrub again (409 gpu_scrub_not_failed unless scrub_failed)",
                              s.GpuScrubInput, s.GpuOutput, "gpu")


class AgentCommandViewSet(mixins.CreateModelMixin, _StaffReadOnly):
    """Commands for node agents. A create is validated (MIG layouts by the planner) before it is queued."""

    serializer_class = s.AgentCommandOutput
    filterset_class = filters.AgentCommandFilter
    selector = staticmethod(selectors.agent_command_list_visible_to)

    @extend_schema(request=s.AgentCommandInput, responses={201: s.AgentCommandOutput})
    def create(self, request, *args, **kwargs):
        data = self._input(s.AgentCommandInput)
        cmd = agent_services.agent_command_enqueue(actor=request.user, host=data["host"], kind=data["kind"],
                                                   payload=data["payload"])
        return self._out(cmd, status.HTTP_201_CREATED)


def _catalog_entry(spec) -> dict:
    sources = load_sources()
    cites = set(spec.raw.get("cite_memory", [])) | set(spec.raw.get("cite_sriov", []))
    for block in ("pcie", "nvlink", "mig", "vgpu"):
        cites |= set((spec.raw.get(block) or {}).get("cite", []))
    return {
        "key": spec.key, "name": spec.name, "architecture": spec.architecture, "memory_gb": spec.memory_gb,
        "memory_mib": spec.memory_mib, "form_factor": spec.form_factor, "pcie_generation": spec.pcie_generation,
        "pcie_width": spec.pcie_width, "nvlink": spec.nvlink, "nvswitch_system": spec.nvswitch_system,
        "nvswitch_partitions": nvswitch_partitions(spec.nvswitch_system), "sriov_vfs": spec.sriov_vfs,
        "mig_profiles": [vars(p) | {"starts": list(p.starts)} for p in (spec.mig.profiles if spec.mig else ())],
        "vgpu_backing": spec.vgpu_backing, "vgpu_types": [vars(t) for t in spec.vgpu_types],
        "sources": {c: sources[c] for c in sorted(cites)},
    }


class GpuModelViewSet(viewsets.ViewSet):
    """The GPU model catalog (readable by any authenticated user): memory, NVLink, MIG, vGPU, VFs, partitions."""

    permission_classes = [permissions.IsAuthenticated]
    serializer_class = s.GpuModelOutput
    lookup_field = "key"
    lookup_value_regex = "[A-Za-z0-9._-]+"

    @extend_schema(responses=s.GpuModelOutput(many=True))
    def list(self, request):
        return Response([_catalog_entry(m) for m in catalog_list()])

    @extend_schema(responses=s.GpuModelOutput)
    def retrieve(self, request, key=None):
        """`key` is matched case-insensitively (`h100-sxm5-80gb` finds `H100-SXM5-80GB`)."""
        spec = catalog_get(key) or next((m for m in catalog_list() if m.key.lower() == (key or "").lower()), None)
        if spec is None:
            raise NotFound(f"No GPU model {key!r} in the catalog.", code="gpu_model_not_found")
        return Response(_catalog_entry(spec))


class YamlDocumentParser(parsers.BaseParser):
    """A raw YAML body (`Content-Type: application/yaml`) becomes `{"document": <text>}`."""

    media_type = "application/yaml"

    def parse(self, stream, media_type=None, parser_context=None):
        return {"document": stream.read().decode("utf-8")}


class FleetImportView(APIView):
    """Validate a fleet YAML document and show its diff; `dry_run=false` applies it in one transaction.

    Body: JSON `{"document": "<yaml>", "dry_run": true}`, or the raw YAML with `Content-Type: application/yaml`
    and `?dry_run=false` to apply.
    """

    permission_classes = [IsStaffOperator]
    serializer_class = s.FleetImportInput
    parser_classes = [parsers.JSONParser, YamlDocumentParser]

    @extend_schema(request=s.FleetImportInput, responses=s.FleetImportOutput)
    def post(self, request):
        if not isinstance(request.data, Mapping):
            raise ValidationFailed("The body must be a JSON object or a YAML document.",
                                   errors={"non_field_errors": ["expected a JSON object"]})
        payload = dict(request.data)
        if "dry_run" in request.query_params:
            payload["dry_run"] = request.query_params["dry_run"]
        data = s.FleetImportInput(data=payload)
        data.is_valid(raise_exception=True)
        dry_run = data.validated_data["dry_run"]
        plan = fleet_import(actor=request.user, document=data.validated_data["document"], dry_run=dry_run)
        return Response({"dry_run": dry_run, "applied": not dry_run and bool(plan.changes),
                         "changes": plan.diff_lines(), "summary": plan.summary()})


class FleetExportView(APIView):
    """The whole fleet as an explicit YAML document that re-imports with no change."""

    permission_classes = [IsStaffOperator]
    serializer_class = s.FleetExportOutput

    @extend_schema(responses=s.FleetExportOutput)
    def get(self, request):
        return Response({"document": fleet_export_yaml()})


# --- node agent ------------------------------------------------------------------------------------------------
class AgentEnrollView(APIView):
    """Exchange a one-time enrollment token (and the discovered inventory) for an agent credential."""

    authentication_classes: list = []
    permission_classes = [permissions.AllowAny]
    serializer_class = s.AgentEnrollInput

    @extend_schema(request=s.AgentEnrollInput, responses={201: s.AgentEnrollOutput}, auth=[])
    def post(self, request):
        data = s.AgentEnrollInput(data=request.data)
        data.is_valid(raise_exception=True)
        cred, clear = agent_services.agent_enroll(**data.validated_data)
        return Response({"host_id": cred.host_id, "host": cred.host.name, "credential": clear},
                        status=status.HTTP_201_CREATED)


class _AgentView(APIView):
    authentication_classes = [AgentAuthentication]
    permission_classes = [IsAgent]


class AgentHeartbeatView(_AgentView):
    """Heartbeat, optionally with a fresh inventory; answers with the number of pending commands."""

    serializer_class = s.AgentHeartbeatInput

    @extend_schema(request=s.AgentHeartbeatInput, responses=s.AgentHeartbeatOutput)
    def post(self, request):
        data = s.AgentHeartbeatInput(data=request.data)
        data.is_valid(raise_exception=True)
        host = agent_services.agent_heartbeat(credential=request.auth, **data.validated_data)
        if host is None:  # deleted while its credential was cached
            raise exceptions.AuthenticationFailed("Invalid or revoked agent credential.")
        return Response({"host": host.name, "state": host.state, "pending_commands": host.pending_commands})


class AgentCommandPollView(_AgentView):
    """Commands for this host that have no result yet (oldest first)."""

    serializer_class = s.AgentCommandOutput

    @extend_schema(responses=s.AgentCommandOutput(many=True), operation_id="agent_commands_poll")
    def get(self, request):
        cmds = agent_services.agent_commands_pull(credential=request.auth)
        return Response(s.AgentCommandOutput(cmds, many=True).data)


class AgentCommandResultView(_AgentView):
    """Report a command's result; repeated reports of one command id change nothing."""

    serializer_class = s.AgentCommandResultInput

    @extend_schema(request=s.AgentCommandResultInput, responses=s.AgentCommandOutput)
    def post(self, request, pk=None):
        data = s.AgentCommandResultInput(data=request.data)
        data.is_valid(raise_exception=True)
        cmd = agent_services.agent_command_report(credential=request.auth, command_id=pk, **data.validated_data)
        return Response(s.AgentCommandOutput(cmd).data)

