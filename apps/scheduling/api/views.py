"""Staff API of scheduling: the placement dry run, a read-only view of the live ledger, and the fleet heat map
(inventory joined with the ledger, so it lives here: inventory does not import scheduling)."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api import validated
from apps.core.schema import problems
from apps.identity.permissions import IsStaffOperator

from ..errors import Code
from ..placement import PlacementRequest, TopologyConstraint
from ..selectors import allocation_list_live, fleet_summary
from ..services import placement_candidates
from . import serializers as s
from .filters import AllocationFilter


class PlacementCandidatesViewSet(viewsets.GenericViewSet):
    """`POST /api/v1/placement/candidates`: where a request would land and why. Writes nothing.

    200 with ``placeable`` false and ``code`` ``capacity_unavailable`` when nothing can hold it; the
    explanation counts, per filter, the hosts it removed and why."""

    permission_classes = [IsStaffOperator]
    serializer_class = s.PlacementRequestInput

    @extend_schema(request=s.PlacementRequestInput, responses={200: s.PlacementCandidatesOutput})
    def create(self, request):
        data = self.get_serializer(data=request.data)
        validated(data)
        v = dict(data.validated_data)
        limit = v.pop("limit")
        topo = v.pop("topology", None) or {}
        req = PlacementRequest(
            project_id=v.pop("project").pk, lease_id=getattr(v.pop("lease"), "pk", None), gpu_models=tuple(v.pop("gpu_models")),
            topology=TopologyConstraint(**topo), **v)
        result = placement_candidates(actor=request.user, request=req, limit=limit)
        body = {"placeable": result.placeable,
                "code": None if result.placeable else Code.CAPACITY_UNAVAILABLE.value,
                "candidates": [c.as_dict() for c in result.candidates], "explanation": result.explanation}
        return Response(body, status=status.HTTP_200_OK)


class AllocationViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Live allocations of the ledger (end open or in the future). Staff read; written only by services."""

    permission_classes = [IsStaffOperator]
    serializer_class = s.AllocationOutput
    filterset_class = AllocationFilter

    def get_queryset(self):
        return allocation_list_live()


class FleetSummaryView(APIView):
    """`GET /api/v1/fleet/summary`: the admin portal's heat map of the whole fleet in one response (regions →
    zones → racks → hosts → GPUs), read in a constant number of queries. Any staff role reads it; tenants get 404
    (as for an object they may not see: the fleet is provider-internal)."""

    permission_classes = [permissions.IsAuthenticated]
    serializer_class = s.FleetSummaryOutput

    @extend_schema(responses={200: s.FleetSummaryOutput, **problems({
        404: "not_found: the caller is not provider staff (the fleet is not shown to tenants)."})},
        summary="The fleet heat map (staff)")
    def get(self, request):
        # built as plain dicts (a serializer over 16,000 GPUs would cost more than the queries)
        return Response(fleet_summary(request.user))
