"""Cursor pagination: default 50, max 500 per page (`?page_size=`), ordered by the UUIDv7 id (creation order)."""
from rest_framework import pagination
from rest_framework.exceptions import NotFound

from .errors import ValidationFailed


class CursorPagination(pagination.CursorPagination):
    page_size = 50
    max_page_size = 500
    page_size_query_param = "page_size"
    ordering = "-id"
    invalid_cursor_message = "Invalid cursor: pass back the `next` or `previous` link unchanged."

    def decode_cursor(self, request):
        """A malformed cursor is the client's input error: 400 `invalid_cursor` (DRF answers 404)."""
        try:
            return super().decode_cursor(request)
        except NotFound:
            raise ValidationFailed(self.invalid_cursor_message, code="invalid_cursor",
                                   errors={self.cursor_query_param: [self.invalid_cursor_message]})
