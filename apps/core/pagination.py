"""Cursor pagination: default 50, max 500 per page (`?page_size=`), ordered by the UUIDv7 id (creation order).

A page size that is not an integer from 1 to 500 (the schema's bounds) is 400 `invalid_page_size` naming
`page_size`. A cursor that was not passed back unchanged (not strict base64, malformed, or well-formed with a
position that is not a value of the ordering field) is 400 `invalid_cursor` naming `cursor`.
"""
import base64
import binascii

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
        if not 1 <= size <= self.max_page_size:
            msg = f"page_size must be an integer from 1 to {self.max_page_size}."
            raise ValidationFailed(msg, code="invalid_page_size", errors={self.page_size_query_param: [msg]})
        return size

    def _invalid_cursor(self):
        return ValidationFailed(self.invalid_cursor_message, code="invalid_cursor",
                                errors={self.cursor_query_param: [self.invalid_cursor_message]})

    def decode_cursor(self, request):
        """A malformed cursor is the client's input error: 400 `invalid_cursor` (DRF answers 404)."""
        raw = request.query_params.get(self.cursor_query_param)
        if raw:
            try:  # DRF's decoder drops characters outside the alphabet, so `%%%%` read as the first page
                base64.b64decode(raw.encode("ascii"), validate=True)
            except (ValueError, UnicodeEncodeError, binascii.Error):
                raise self._invalid_cursor() from None
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
