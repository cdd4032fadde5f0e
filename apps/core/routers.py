"""The API router: collection and detail routes answer with and without a trailing slash.

DRF >= 3.15 normalises `SimpleRouter(trailing_slash="/?")` to "/", so the optional slash is set after init.
"""
from rest_framework.routers import SimpleRouter


class ApiRouter(SimpleRouter):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.trailing_slash = "/?"
