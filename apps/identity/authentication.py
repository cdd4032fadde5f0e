"""API token authentication (`Authorization: Bearer <secret>`). Implemented with ApiToken in identity."""
from rest_framework.authentication import BaseAuthentication


class BearerTokenAuthentication(BaseAuthentication):
    def authenticate(self, request):
        return None

    def authenticate_header(self, request):
        return 'Bearer realm="api"'
