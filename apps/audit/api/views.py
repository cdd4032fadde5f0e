"""`GET /api/v1/audit-events`: tenants list their organizations' events, staff see all.
Staff only: `GET /audit-events/export` (JSON Lines for a SIEM) and `GET /audit-events/verify` (the hash chain)."""
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.core.errors import ValidationFailed
from apps.identity.permissions import IsStaffOperator

from ..selectors import (
    audit_chain_verify,
    audit_event_list_visible_to,
    audit_export_lines,
    audit_target_names,
)
from .filters import AuditEventFilter
from .serializers import AuditChainReportOutput, AuditEventOutput

EXPORT_MAX = 10_000  # lines per request: a collector pages on with after_seq


def _int_param(request, name: str, default: int, maximum: int) -> int:
    raw = request.query_params.get(name, "")
    if raw == "":
        return default
    if not raw.isdigit() or int(raw) > maximum:
        raise ValidationFailed(f"{name} must be an integer from 0 to {maximum}.",
                               errors={name: [f"an integer from 0 to {maximum}"]})
    return int(raw)


class AuditEventViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Append-only audit trail (newest first), filterable by actor, action, target and time range."""

    serializer_class = AuditEventOutput
    filterset_class = AuditEventFilter
    lookup_value_regex = "[0-9a-fA-F-]{36}"

    def get_queryset(self):
        return audit_event_list_visible_to(self.request.user)

    # The targets' names, for provider staff only (a tenant's event may name fleet objects, whose names are the
    # provider's): one query per target type of the page or the one event.
    def _names_for(self, events):
        from apps.tenancy.selectors import is_staff

        self._target_names = audit_target_names(events) if is_staff(self.request.user) else {}

    def paginate_queryset(self, queryset):
        page = super().paginate_queryset(queryset)
        self._names_for(page if page is not None else queryset)
        return page

    def get_object(self):
        event = super().get_object()
        self._names_for([event])
        return event

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "target_names": getattr(self, "_target_names", {})}

    def get_permissions(self):
        if self.action in ("export", "verify"):
            return [IsStaffOperator()]
        return super().get_permissions()

    @extend_schema(
        parameters=[OpenApiParameter("after_seq", int, description="Events after this chain position (default 0)."),
                    OpenApiParameter("limit", int, description=f"At most this many lines (default and max "
                                                               f"{EXPORT_MAX}).")],
        responses={(200, "application/jsonl"): OpenApiTypes.STR},
        description="Chained events in commit order, one JSON object per line with seq, prev_hash and hash "
                    "(ADR 0111). Staff only.")
    @action(detail=False, methods=["get"], filterset_class=None, pagination_class=None)
    def export(self, request):
        after_seq = _int_param(request, "after_seq", 0, 2**62)
        limit = _int_param(request, "limit", EXPORT_MAX, EXPORT_MAX)
        body = "".join(line + "\n" for line in audit_export_lines(after_seq=after_seq, limit=limit))
        return HttpResponse(body, content_type="application/jsonl")

    @extend_schema(responses={200: AuditChainReportOutput},
                   description="Recompute the hash chain and report the first broken link (null when intact). "
                               "Staff only.")
    @action(detail=False, methods=["get"], filterset_class=None, pagination_class=None,
            serializer_class=AuditChainReportOutput)
    def verify(self, request):
        report = audit_chain_verify()
        return Response(AuditChainReportOutput(report).data)


