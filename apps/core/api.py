"""Helpers every app's API views share: parse input with an Input serializer, render with the Output one.

Input is strict: a body member the Input serializer does not define is a 400 `validation_error` naming it
(`errors: {"<member>": ["Unknown field."]}`), so a misspelt optional field is never silently ignored (as Nova's
JSON-schema validation rejects additional properties).
"""
from collections.abc import Mapping

from rest_framework import status
from rest_framework.response import Response

from .conditional import ConditionalMixin
from .errors import ValidationFailed

UUID_PATTERN = "[0-9a-fA-F-]{36}"


class ApiViewMixin(ConditionalMixin):
    """Mixed into each app's base viewset: UUID lookups, `_input` (validated data or a 400 problem), `_out`, and
    `ETag`/`If-Match` on single objects (`apps.core.conditional`)."""

    lookup_value_regex = UUID_PATTERN

    def _input(self, cls, data=None, **kwargs) -> dict:
        serializer = cls(data=self.request.data if data is None else data, context=self.get_serializer_context(),
                         **kwargs)
        return validated(serializer)

    def _out(self, obj, code=status.HTTP_200_OK, cls=None) -> Response:
        serializer = (cls or self.get_serializer_class())(obj, context=self.get_serializer_context())
        return Response(serializer.data, status=code)


def validated(serializer) -> dict:
    """`serializer.validated_data`, or a 400 problem: unknown top-level members first, then DRF's validation."""
    data = serializer.initial_data
    if isinstance(data, Mapping) and not getattr(serializer, "many", False):
        unknown = sorted(k for k in data if k not in serializer.fields)
        if unknown:
            raise ValidationFailed(f"Unknown field{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}.",
                                   errors={k: ["Unknown field."] for k in unknown})
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data
