"""Tenancy writes (keyword-only, `actor` first). Each runs in one transaction and writes its audit event."""
from .invitations import invitation_accept, invitation_create, invitation_preview, invitation_revoke
from .memberships import membership_add, membership_create, membership_delete, membership_update
from .organizations import organization_create, organization_update
from .projects import project_create, project_delete, project_update
from .quotas import quota_authorize, quota_create, quota_delete, quota_update
from .signup import signup_complete, signup_request

__all__ = [
    "invitation_accept", "invitation_create", "invitation_preview", "invitation_revoke",
    "membership_add", "membership_create", "membership_delete", "membership_update",
    "organization_create", "organization_update",
    "project_create", "project_delete", "project_update",
    "quota_authorize", "quota_create", "quota_delete", "quota_update",
    "signup_complete", "signup_request",
]
