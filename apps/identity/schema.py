"""drf-spectacular descriptions of our authentication schemes (loaded by IdentityConfig.ready)."""
from drf_spectacular.extensions import OpenApiAuthenticationExtension


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.identity.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "bearerFormat": "gpc_<prefix>_<secret>",
                "description": "API token from POST /api/v1/tokens or `manage.py create_api_token`."}


class ConsoleSessionScheme(OpenApiAuthenticationExtension):
    target_class = "apps.identity.authentication.SessionAuthentication"
    name = "cookieAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "cookie", "name": "sessionid",
                "description": "Console session from POST /api/v1/session; unsafe methods need X-CSRFToken."}
