"""Test-only routes layered over the real URLconf, for exercising the error handler."""
from django.urls import include, path
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.errors import QuotaExceeded


class _Input(serializers.Serializer):
    name = serializers.CharField(max_length=5)
    count = serializers.IntegerField(min_value=1)


class ValidatingView(APIView):
    authentication_classes: list = []
    permission_classes: list = []

    def post(self, request):
        _Input(data=request.data).is_valid(raise_exception=True)
        return Response({"ok": True})


class BoomView(APIView):
    authentication_classes: list = []
    permission_classes: list = []

    def get(self, request):
        raise RuntimeError("secret internal detail: do not leak")


class QuotaView(APIView):
    authentication_classes: list = []
    permission_classes: list = []

    def post(self, request):
        raise QuotaExceeded("Project quota for gpus exceeded.", resource="gpus", limit=8, usage=8, requested=1)


class OperationPage(APIView):
    """Lists operations with the default cursor pagination (no auth: test only)."""

    authentication_classes: list = []
    permission_classes: list = []

    def get(self, request):
        from apps.core.pagination import CursorPagination
        from apps.operations.models import Operation

        paginator = CursorPagination()
        page = paginator.paginate_queryset(Operation.objects.all(), request, view=self)
        return paginator.get_paginated_response([str(op.id) for op in page])


def plain_boom(request):
    raise ValueError("plain view failure with secret detail")


urlpatterns = [
    path("test/validate", ValidatingView.as_view()),
    path("test/boom", BoomView.as_view()),
    path("test/quota", QuotaView.as_view()),
    path("test/plain-boom", plain_boom),
    path("test/page", OperationPage.as_view()),
    path("", include("gpucloud.urls")),
]
handler400 = "apps.core.handlers.bad_request"
handler403 = "apps.core.handlers.permission_denied"
handler404 = "apps.core.handlers.not_found"
handler500 = "apps.core.handlers.server_error"
