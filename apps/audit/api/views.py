"""`GET /api/v1/audit-events`: tenants list their organizations' events, staff see all."""
from rest_framework import mixins, viewsets

from ..selectors import audit_event_list_visible_to
from .filters import AuditEventFilter
from .serializers import AuditEventOutput


class AuditEventViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Append-only audit trail (newest first), filterable by actor, action, target and time range."""

    serializer_class = AuditEventOutput
    filterset_class = AuditEventFilter
    lookup_value_regex = "[0-9a-fA-F-]{36}"

    def get_queryset(self):
        return audit_event_list_visible_to(self.request.user)
