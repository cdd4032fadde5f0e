"""Cursor pagination: default 50, max 500 per page (`?page_size=`), ordered by the UUIDv7 id (creation order).

A page size that is not a positive integer is 400 `invalid_page_size`; one above the maximum is capped at it.
A cursor that was not passed back unchanged (malformed, or well-formed with a position that is not a value of the
ordering field) is 400 `invalid_cursor` naming `cursor`.
"""
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import pagination
from rest_framework.exceptions import NotFound

from .errors import ValidationFailed


class CursorPagination(pagination.CursorPagination):
    page_size = 50
    max_page_size = 500
    page_size_query_param = "page_size"
    ordering = "-id"
    invalid_cursor_message = "Invalid cursor: pass back the `next` or `previous` link unchanged."

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        try:
            size = int(raw)
        except ValueError:
            size = 0
        if size < 1:
            msg = f"page_size must be an integer from 1 to {self.max_page_size}."
            raise ValidationFailed(msg, code="invalid_page_size", errors={self.page_size_query_param: [msg]})
        return min(size, self.max_page_size)

    def _invalid_cursor(self):
        return ValidationFailed(self.invalid_cursor_message, code="invalid_cursor",
                                errors={self.cursor_query_param: [self.invalid_cursor_message]})

    def decode_cursor(self, request):
        """A malformed cursor is the client's input error: 400 `invalid_cursor` (DRF answers 404)."""
        try:
            return super().decode_cursor(request)
        except NotFound:
            raise self._invalid_cursor() from None

    def paginate_queryset(self, queryset, request, view=None):
        try:
            return super().paginate_queryset(queryset, request, view)
        except DjangoValidationError:
            if request.query_params.get(self.cursor_query_param) is None:
                raise
            raise self._invalid_cursor() from None  # a forged position the ordering field cannot hold
