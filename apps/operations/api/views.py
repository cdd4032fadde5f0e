from rest_framework import mixins, viewsets

from ..selectors import operation_list_visible_to
from .serializers import OperationOutput


class OperationViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """`GET /api/v1/operations/{id}`: the state of a long-running action."""

    serializer_class = OperationOutput

    def get_queryset(self):
        return operation_list_visible_to(self.request.user)
