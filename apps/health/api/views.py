"""Health API: the agent's event report, the staff classification table and preview, the tenant's event list,
remediations (list, approve) and the project's remediation policy (consent mode).

Views parse, authorize, call one service or selector, and format (docs/health.md).
"""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api import ApiViewMixin, validated
from apps.core.errors import NotFound
from apps.core.schema import problems
from apps.identity.permissions import IsStaffOperator
from apps.inventory.authentication import AgentAuthentication, IsAgent

from .. import selectors
from ..classification import classification_load
from ..services import health_event_ingest, health_event_preview
from ..services.breaker import breaker_release
from ..services.fencing import fence_confirm
from ..services.remediation import policy_for, remediation_approve, remediation_policy_set
from ..services.repair import rma_close, rma_ship
from ..states import EventSource
from . import filters
from . import serializers as s


class AgentHealthEventView(APIView):
    """The node agent reports one health signal (XID, ECC, NVLink, ...) of its own host; 201 when recorded, 200
    with the stored event when its `dedup_key` was seen before (nothing changes). Unknown GPU or port: 400."""

    authentication_classes = [AgentAuthentication]
    permission_classes = [IsAgent]
    serializer_class = s.AgentHealthEventInput

    @extend_schema(
        request=s.AgentHealthEventInput,
        responses={201: s.AgentHealthEventOutput, 200: s.AgentHealthEventOutput},
    )
    def post(self, request):
        data = validated(s.AgentHealthEventInput(data=request.data))
        event, created = health_event_ingest(
            actor=None, host=request.user.host, source=EventSource.AGENT, **data
        )
        body = {
            "id": event.id,
            "created": created,
            "classification": event.classification,
            "classification_version": event.classification_version,
            "effects": event.effects,
            "applied": event.applied,
        }
        return Response(
            s.AgentHealthEventOutput(body).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class ClassificationView(APIView):
    """The fault classification table in force (apps/health/classification.yaml), rows in match order."""

    permission_classes = [IsStaffOperator]
    serializer_class = s.ClassificationOutput

    @extend_schema(responses=s.ClassificationOutput, operation_id="health_classification_retrieve")
    def get(self, request):
        c = classification_load()
        return Response(
            s.ClassificationOutput({"version": c.version, "rows": [r.as_dict() for r in c.rules]}).data
        )


class HostWorkloadsView(APIView):
    """Staff: what runs on a host now (instances, cluster members, leases, with their organization and the GPUs
    they hold) and the last 20 remediations off it, newest first: the admin portal's host panel, where an operator
    sees what a drain leaves running and where health moved the VMs. Tenants get 404."""

    permission_classes = [IsStaffOperator]
    serializer_class = s.HostWorkloadsOutput

    @extend_schema(responses={200: s.HostWorkloadsOutput, **problems({
        404: "not_found: no such host, or the caller is not provider staff."})},
        operation_id="health_host_workloads_retrieve")
    def get(self, request, host_id):
        from apps.inventory.selectors import host_list_visible_to

        host = host_list_visible_to(request.user).filter(pk=host_id).first()
        if host is None:
            raise NotFound("No such host.")
        return Response(s.HostWorkloadsOutput(selectors.host_workloads(host)).data)


class HealthPreviewView(APIView):
    """What an event would trigger on its host now (row, actions, pending hooks); writes nothing."""

    permission_classes = [IsStaffOperator]
    serializer_class = s.HealthPreviewInput

    @extend_schema(request=s.HealthPreviewInput, responses=s.HealthPreviewOutput)
    def post(self, request):
        data = validated(s.HealthPreviewInput(data=request.data, context={"request": request}))
        return Response(s.HealthPreviewOutput(health_event_preview(**data)).data)


class HealthEventViewSet(ApiViewMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """Health events that touched the caller's resources (one row per resource); another tenant's are never
    listed. Hosts, GPU serials and other tenants' resources are not shown."""

    permission_classes = [IsAuthenticated]
    serializer_class = s.HealthEventOutput
    filterset_class = filters.HealthEventFilter

    def get_queryset(self):
        return selectors.health_event_impact_list_visible_to(self.request.user)


@extend_schema_view(list=extend_schema(operation_id="health_staff_events_list"),
                    retrieve=extend_schema(operation_id="health_staff_events_retrieve"))
class StaffHealthEventViewSet(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Staff (any role reads): every health event of the fleet, newest observed first, filtered by host, GPU,
    kind, classification, source and time; anyone else gets 404. The admin portal's health events screen."""

    permission_classes = [IsStaffOperator]
    serializer_class = s.StaffHealthEventOutput
    filterset_class = filters.StaffHealthEventFilter
    lookup_value_regex = "[0-9a-fA-F-]{36}"

    def get_queryset(self):
        return selectors.health_event_list()


class RemediationViewSet(
    ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """VMs of the caller's projects to move off a failed GPU or host (staff see all). Another tenant's
    remediation is a 404 like a missing one."""

    permission_classes = [IsAuthenticated]
    serializer_class = s.RemediationOutput
    filterset_class = filters.RemediationFilter

    def get_queryset(self):
        return selectors.remediation_list_visible_to(self.request.user)

    @extend_schema(
        request=None,
        responses={
            200: s.RemediationOutput,
            **problems(
                {
                    403: "a project reader (members and admins approve)",
                    409: "invalid_state: only a proposed (or noticed) remediation is approved (allowed_states); "
                    "not_supported_for_flavor_kind: the instance's flavor kind cannot be re-created "
                    "(never capacity_unavailable: without capacity now the remediation waits, its reason says why)",
                }
            ),
        },
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        """Approve the move (consent mode propose; on an auto one, move now instead of at the deadline)."""
        rem = remediation_approve(actor=request.user, remediation=self.get_object())
        return self._out(selectors.remediation_list_visible_to(request.user).get(pk=rem.pk))


def _project(request, project_id):
    from apps.tenancy.selectors import project_list_visible_to

    project = (
        project_list_visible_to(request.user).select_related("organization").filter(pk=project_id).first()
    )
    if project is None:
        raise NotFound("No such project.")
    return project


class RemediationPolicyView(APIView):
    """A project's consent mode for moving its VMs off failed devices (`auto` | `propose` | `off`) and the
    checkpoint notice length; without one set, the installation's defaults. Project admins change it."""

    permission_classes = [IsAuthenticated]
    serializer_class = s.RemediationPolicyOutput

    def _body(self, project):
        mode, notice = policy_for(project)
        return s.RemediationPolicyOutput(
            {"project": project.pk, "consent_mode": mode, "notice_seconds": notice}
        ).data

    @extend_schema(
        responses={200: s.RemediationPolicyOutput, **problems({404: "no such project (or another tenant's)"})}
    )
    def get(self, request, project_id):
        return Response(self._body(_project(request, project_id)))

    @extend_schema(
        request=s.RemediationPolicyInput,
        responses={
            200: s.RemediationPolicyOutput,
            **problems({403: "not a project admin", 404: "no such project"}),
        },
    )
    def put(self, request, project_id):
        project = _project(request, project_id)
        data = validated(s.RemediationPolicyInput(data=request.data))
        remediation_policy_set(actor=request.user, project=project, **data)
        return Response(self._body(project))


class BreakerViewSet(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Staff: component incidents of the blast-radius breaker (newest first); `release` resumes automatic
    take-outs under the switch."""

    permission_classes = [IsStaffOperator]
    serializer_class = s.ComponentIncidentOutput

    def get_queryset(self):
        return selectors.component_incident_list()

    @extend_schema(
        request=None,
        responses={200: s.ComponentIncidentOutput, **problems({409: "invalid_state: released already"})},
    )
    @action(detail=True, methods=["post"])
    def release(self, request, pk=None):
        row = breaker_release(actor=request.user, incident=self.get_object())
        return self._out(selectors.component_incident_list().get(pk=row.pk))


class RepairViewSet(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Staff: repairs and acceptances of GPUs and hosts with their return-to-service check (newest first;
    filters `host` (name), `status`, `kind`)."""

    permission_classes = [IsStaffOperator]
    serializer_class = s.RepairOutput
    filterset_class = filters.RepairFilter

    def get_queryset(self):
        return selectors.repair_list()


class RmaViewSet(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Staff: RMA records (newest first); `ship` records the part sent to its vendor, `close` the vendor's outcome."""

    permission_classes = [IsStaffOperator]
    serializer_class = s.RmaOutput

    def get_queryset(self):
        return selectors.rma_list()

    @extend_schema(request=None, responses={200: s.RmaOutput, **problems({409: "invalid_state: shipped or closed"})})
    @action(detail=True, methods=["post"])
    def ship(self, request, pk=None):
        row = rma_ship(actor=request.user, rma=self.get_object())
        return self._out(selectors.rma_list().get(pk=row.pk))

    @extend_schema(request=s.RmaCloseInput,
                   responses={200: s.RmaOutput, **problems({409: "invalid_state: closed already"})})
    @action(detail=True, methods=["post"])
    def close(self, request, pk=None):
        data = validated(s.RmaCloseInput(data=request.data))
        row = rma_close(actor=request.user, rma=self.get_object(), outcome=data["outcome"])
        return self._out(selectors.rma_list().get(pk=row.pk))


class FenceViewSet(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Staff: fences of silent hosts (newest first); `confirm` records that staff found the host off by hand, which
    lets its VMs move (ADR 0218)."""

    permission_classes = [IsStaffOperator]
    serializer_class = s.FenceOutput

    def get_queryset(self):
        return selectors.fence_list()

    @extend_schema(request=s.FenceConfirmInput,
                   responses={200: s.FenceOutput, **problems({400: "reason_required",
                                                             409: "invalid_state: confirmed already"})})
    @action(detail=True, methods=["post"])
    def confirm(self, request, pk=None):
        data = validated(s.FenceConfirmInput(data=request.data))
        row = fence_confirm(actor=request.user, fence=self.get_object(), reason=data["reason"])
        return self._out(selectors.fence_list().get(pk=row.pk))
