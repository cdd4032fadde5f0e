from rest_framework import mixins, viewsets

from apps.core.api import ApiViewMixin

from ..selectors import operation_list_visible_to
from .filters import OperationFilter
from .serializers import OperationOutput


class OperationViewSet(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Long-running actions. `GET /api/v1/operations/{id}`: the state of one; `GET /api/v1/operations`: those
    of the projects the caller can see (staff: all), newest first, cursor-paginated, filtered by `status`,
    `kind`, `target_type`, `target_id`, `project`, `created_after`, `created_before`."""

    serializer_class = OperationOutput
    filterset_class = OperationFilter

    def get_queryset(self):
        return operation_list_visible_to(self.request.user)
