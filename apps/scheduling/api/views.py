"""Staff API of scheduling: the placement dry run and a read-only view of the live ledger."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.response import Response

from apps.core.api import validated
from apps.identity.permissions import IsStaffOperator

from ..errors import Code
from ..placement import PlacementRequest, TopologyConstraint
from ..selectors import allocation_list_live
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
