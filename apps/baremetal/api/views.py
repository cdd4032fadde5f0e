"""Bare-metal API: /bare-metal/nodes (staff: enroll, list, recover), /bare-metal/exit-receipts (tenants: their
projects' receipts; another tenant's is a 404), /bare-metal/receipt-key (public: the key receipts verify with).
Enroll and recover answer 202 with `Location: /api/v1/operations/{id}`."""
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api import ApiViewMixin
from apps.core.request_context import get_request_id
from apps.core.schema import BAREMETAL_UNAVAILABLE, problems
from apps.identity.permissions import IsStaffOperator

from .. import selectors
from ..services import nodes, secrets
from . import filters
from . import serializers as s


def _accepted(node, op) -> Response:
    node.refresh_from_db()
    return Response(s.NodeAccepted({"node": node, "operation": op}).data, status=status.HTTP_202_ACCEPTED,
                    headers={"Location": f"/api/v1/operations/{op.pk}"})


class NodeViewSet(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Bare-metal nodes (staff): provision state, power and maintenance as Ironic last reported them; a node held
    out of service names why (`held_reason`)."""

    permission_classes = [IsStaffOperator]
    serializer_class = s.NodeOutput
    filterset_class = filters.NodeFilter

    def get_queryset(self):
        return selectors.node_list_visible_to(self.request.user)

    @extend_schema(request=s.NodeEnrollInput, responses={202: s.NodeAccepted, **problems({
        400: "host_not_baremetal: the host is a hypervisor; validation_error: driver or BMC fields.",
        409: "node_exists: the host already has a node; invalid_state: a retired host.",
        503: BAREMETAL_UNAVAILABLE})})
    def create(self, request):
        data = self._input(s.NodeEnrollInput)
        node, op = nodes.node_enroll(actor=request.user, request_id=get_request_id(), **data)
        return _accepted(node, op)

    @extend_schema(request=None, responses={202: s.NodeAccepted, **problems({503: BAREMETAL_UNAVAILABLE})})
    @action(detail=True, methods=["post"])
    def recover(self, request, pk=None):
        node = self.get_object()
        return _accepted(node, nodes.node_recover(actor=request.user, node=node, request_id=get_request_id()))


class ReceiptViewSet(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Signed exit receipts of bare-metal instances (one per deleted instance): `payload` is the signed text,
    `signature` its Ed25519 signature (base64); filter with `?instance=<id>`."""

    serializer_class = s.ReceiptOutput

    filterset_class = filters.ReceiptFilter

    def get_queryset(self):
        return selectors.receipt_list_visible_to(self.request.user)


class ReceiptKeyView(APIView):
    """The deployment's public key for exit receipts (public, no credentials needed)."""

    authentication_classes: list = []
    permission_classes = [permissions.AllowAny]

    @extend_schema(responses={200: s.ReceiptKeyOutput}, auth=[])
    def get(self, request):
        return Response(s.ReceiptKeyOutput(secrets.public_key_info()).data)
