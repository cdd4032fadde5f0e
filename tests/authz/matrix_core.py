"""Authorization-matrix entries of the OpenAPI schema and its docs page (public)."""
from .framework import Entry, expect

PUBLIC = expect(anonymous=200, other_org=200)
ENTRIES = [
    Entry("GET", "/api/v1/schema", PUBLIC),
    Entry("GET", "/api/v1/docs", PUBLIC),
]
