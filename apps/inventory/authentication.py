"""The node agent's credential on the API: `Authorization: Agent <credential>` (ADR 0202, `services.agent`).

Every app with an agent endpoint (inventory's heartbeat and commands, health's event report) authenticates with
`AgentAuthentication` and admits with `IsAgent`; `request.user` is an `AgentPrincipal` whose `host` is the
credential's host (never staff, never a tenant). Kept outside `api` so other apps' views need not import
inventory's views.
"""
from functools import cached_property

from rest_framework import authentication, exceptions, permissions

from .models import AgentCredential, Host
from .services import agent as agent_services


class AgentPrincipal:
    """`request.user` for agent requests: authenticated, never staff, never a tenant. `host` is read on first use
    (a heartbeat needs only the credential's `host_id`); a host deleted since is a 401 like a revoked credential."""

    is_authenticated = True
    is_anonymous = False
    staff_role = ""
    pk = None

    def __init__(self, credential: AgentCredential):
        self.credential = credential

    @cached_property
    def host(self) -> Host:
        host = Host.objects.filter(pk=self.credential.host_id).first()
        if host is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked agent credential.")
        return host

    def __str__(self) -> str:
        return f"agent:{self.host.name}"


class AgentAuthentication(authentication.BaseAuthentication):
    keyword = "Agent"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != self.keyword.lower():
            return None
        cred = agent_services.agent_authenticate(raw.strip())
        if cred is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked agent credential.")
        return AgentPrincipal(cred), cred

    def authenticate_header(self, request):
        return 'Agent realm="gpucloud-agent"'


class IsAgent(permissions.BasePermission):
    def has_permission(self, request, view) -> bool:
        return isinstance(request.user, AgentPrincipal)
