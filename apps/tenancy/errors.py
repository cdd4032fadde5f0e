"""Error codes of the tenancy and identity services (stable, snake_case; part of the API contract)."""
from apps.core.errors import Conflict, DomainError, NotFound, ValidationFailed

__all__ = ["Forbidden", "Conflict", "NotFound", "ValidationFailed", "Gone", "Code"]


class Forbidden(DomainError):
    """403: the caller sees the object but its role or token does not allow the action."""

    code, status, title = "permission_denied", 403, "Permission denied"


class Gone(DomainError):
    """410: a link that existed has expired."""

    code, status, title = "gone", 410, "Gone"


class Code:
    PERMISSION_DENIED = "permission_denied"
    TOKEN_READ_ONLY = "token_read_only"
    STAFF_NOT_MEMBER = "staff_not_member"
    UNKNOWN_ROLE = "unknown_role"
    DUPLICATE_MEMBERSHIP = "duplicate_membership"
    LAST_OWNER = "last_owner"
    OWNER_REQUIRED = "owner_required"
    SLUG_TAKEN = "slug_taken"
    PROJECT_NOT_EMPTY = "project_not_empty"
    INVITATION_INVALID = "invitation_invalid"
    INVITATION_EXPIRED = "invitation_expired"
    INVITATION_ALREADY_USED = "invitation_already_used"
    INVITATION_REVOKED = "invitation_revoked"
    INVITATION_EMAIL_MISMATCH = "invitation_email_mismatch"
    INVITATION_PENDING = "invitation_pending"
    UNKNOWN_RESOURCE = "unknown_resource"
    UNKNOWN_PLAN = "unknown_plan"
    QUOTA_EXCEEDED = "quota_exceeded"
    QUOTA_BELOW_USAGE = "quota_below_usage"
    QUOTA_ABOVE_ORGANIZATION = "quota_above_organization"
