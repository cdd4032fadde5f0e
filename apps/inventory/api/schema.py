"""drf-spectacular description of the agent credential scheme."""
from drf_spectacular.extensions import OpenApiAuthenticationExtension


class AgentAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "apps.inventory.authentication.AgentAuthentication"
    name = "agentCredential"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Agent <credential>` as returned by POST /api/v1/agent/enroll"}
