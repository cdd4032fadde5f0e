"""Helpers every app's API views share: parse input with an Input serializer, render with the Output one."""
from rest_framework import status
from rest_framework.response import Response

UUID_PATTERN = "[0-9a-fA-F-]{36}"


class ApiViewMixin:
    """Mixed into each app's base viewset: UUID lookups, `_input` (validated data or a 400 problem) and `_out`."""

    lookup_value_regex = UUID_PATTERN

    def _input(self, cls, data=None, **kwargs) -> dict:
        serializer = cls(data=self.request.data if data is None else data, context=self.get_serializer_context(),
                         **kwargs)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    def _out(self, obj, code=status.HTTP_200_OK, cls=None) -> Response:
        serializer = (cls or self.get_serializer_class())(obj, context=self.get_serializer_context())
        return Response(serializer.data, status=code)
