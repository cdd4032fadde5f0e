"""Health API: the agent's event report, the staff classification table and preview, the tenant's event list.

Views parse, authorize, call one service or selector, and format (docs/health.md).
"""

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api import ApiViewMixin, validated
from apps.identity.permissions import IsStaffOperator
from apps.inventory.authentication import AgentAuthentication, IsAgent

from .. import selectors
from ..classification import classification_load
from ..services import health_event_ingest, health_event_preview
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
