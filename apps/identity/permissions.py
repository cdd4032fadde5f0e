"""DRF permissions for provider staff endpoints.

`StaffActions` is in every view's default permissions (`REST_FRAMEWORK["DEFAULT_PERMISSION_CLASSES"]`): a view
that serves tenants but keeps some actions for staff (a flavor, an image, a public IP pool or an organization is
created by staff) names them in `staff_actions`. DRF checks permissions before the view reads the body, so a
tenant sending any body to such an action gets 403 `permission_denied` and learns nothing of the body's rules;
the service still decides which staff role may write.

`IsStaffOperator` and `IsStaffBillingAdmin` guard the provider-internal endpoints (the fleet, billing's staff side,
the admin portal's): to a signed-in caller who is not provider staff (a tenant, or staff using a tenant-bound
token) they answer 404 `not_found`, as for an object it may not see, so the staff API is not even confirmed to
exist (docs/adr/0930-staff-endpoints-not-found-for-tenants.md); anonymous callers get 401; staff whose role does
not write there, or with a read-scoped token, get 403 `permission_denied`.

`request.auth` is an ApiToken (with `scope` "read" | "write") for bearer requests, None for sessions.
"""
from rest_framework.exceptions import NotFound
from rest_framework.permissions import SAFE_METHODS, BasePermission

from .models import StaffRole


def token_allows_write(request) -> bool:
    """False when the request carries a read-scoped token."""
    return getattr(request.auth, "scope", "write") == "write"


class _StaffRolePermission(BasePermission):
    write_roles: frozenset = frozenset()
    read_roles = frozenset({StaffRole.OPERATOR, StaffRole.BILLING_ADMIN, StaffRole.SUPPORT})

    def has_permission(self, request, view) -> bool:
        user = request.user
        if user is None or not user.is_authenticated:
            return False   # 401 (the authenticators' challenge)
        role = getattr(user, "staff_role", "")
        if not role:
            raise NotFound()
        if request.method in SAFE_METHODS:
            return role in self.read_roles
        return role in self.write_roles and token_allows_write(request)


class IsStaffOperator(_StaffRolePermission):
    """Any staff role reads; only operators write (fleet, placement)."""

    write_roles = frozenset({StaffRole.OPERATOR})
    message = "Only operators change the fleet; your staff role reads it."


class IsStaffBillingAdmin(_StaffRolePermission):
    """Any staff role reads; only billing admins write (price books, invoices)."""

    write_roles = frozenset({StaffRole.BILLING_ADMIN})
    message = "Only billing admins change billing; your staff role reads it."


class StaffActions(BasePermission):
    """The actions in `view.staff_actions` (a viewset's action, e.g. ``{"create"}``, or a plain view's method, e.g.
    ``{"post"}``) are for provider staff only; others pass."""

    message = "Only provider staff may do this."

    def has_permission(self, request, view) -> bool:
        if (getattr(view, "action", None) or request.method.lower()) not in getattr(view, "staff_actions", ()):
            return True
        user = request.user
        return bool(user is not None and user.is_authenticated and getattr(user, "staff_role", ""))
