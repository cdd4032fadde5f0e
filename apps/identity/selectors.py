"""Reads of identity objects, scoped to what the caller may see."""
from __future__ import annotations

from django.db.models import Q, QuerySet

from apps.tenancy.models import OrgRole
from apps.tenancy.selectors import is_staff, org_role_of, organization_ids_visible_to

from .models import ApiToken, ServiceAccount


def _admin_org_ids(user) -> list:
    return [org for org in organization_ids_visible_to(user) if org_role_of(user, org) in (OrgRole.OWNER,
                                                                                           OrgRole.ADMIN)]


def _owner_org_ids(user) -> list:
    return [org for org in organization_ids_visible_to(user) if org_role_of(user, org) == OrgRole.OWNER]


def api_token_list_visible_to(user) -> QuerySet[ApiToken]:
    """The caller's own tokens, plus those of service accounts of organizations it administers, plus (for an
    organization's owners) every token bound to the organization or one of its projects, whoever holds it.
    Staff see all token metadata (never a secret: only digests are stored)."""
    qs = ApiToken.objects.select_related("user")
    if user is None or not user.is_authenticated:
        return qs.none()
    if is_staff(user):
        return qs
    owned = _owner_org_ids(user)
    qs = qs.filter(Q(user_id=user.pk) | Q(user__service_account__organization_id__in=_admin_org_ids(user))
                   | Q(organization_id__in=owned) | Q(project__organization_id__in=owned))
    return _narrow_to_request_token(user, qs)


def _narrow_to_request_token(user, qs: QuerySet[ApiToken]) -> QuerySet[ApiToken]:
    """A request made with a bound token sees only tokens inside that binding: a project token, tokens of its
    project; an organization token, tokens of its organization and its projects (others do not exist: 404)."""
    token = getattr(user, "api_token", None)
    if token is None or token.is_staff_token:
        return qs
    if token.project_id:
        return qs.filter(project_id=token.project_id)
    return qs.filter(Q(organization_id=token.organization_id) | Q(project__organization_id=token.organization_id))


def service_account_list_visible_to(user) -> QuerySet[ServiceAccount]:
    """Service accounts of the organizations the caller belongs to (staff: all)."""
    qs = ServiceAccount.objects.select_related("user", "organization")
    if user is None or not user.is_authenticated:
        return qs.none()
    if is_staff(user):
        return qs
    return qs.filter(organization_id__in=[org for org in organization_ids_visible_to(user)
                                          if org_role_of(user, org)])
