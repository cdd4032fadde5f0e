"""Cursor pagination: default 50, max 500 per page (`?page_size=`), ordered by the UUIDv7 id (creation order)."""
from rest_framework import pagination


class CursorPagination(pagination.CursorPagination):
    page_size = 50
    max_page_size = 500
    page_size_query_param = "page_size"
    ordering = "-id"
