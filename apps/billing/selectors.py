"""Tenant-scoped billing reads. Every API queryset comes from here (tenant scope: CONTRIBUTING.md).

Visibility (docs/billing.md and the organization roles in `apps.tenancy.models.OrgRole`):
- provider staff (any staff role) see everything;
- invoices and credit notes: organization owners, admins and `billing` members (a billing member sees invoices
  but cannot manage instances); finalized, paid and void invoices only — drafts are the provider's work in progress;
- usage records and SLA reports: owners/admins/billing members see their whole organization; other members see the
  projects they can see (`project_list_visible_to`);
- API tokens narrow all of this through the tenancy selectors.
Another tenant's object is simply absent (404).
"""
from __future__ import annotations

from django.db.models import Q, QuerySet

from apps.tenancy import selectors as tenancy
from apps.tenancy.models import OrgRole

from .models import CreditNote, Invoice, PriceBook, SlaReport, SlaTier, UsageRecord
from .states import InvoiceStatus

BILLING_ROLES = (OrgRole.OWNER, OrgRole.ADMIN, OrgRole.BILLING)


def _authenticated(user) -> bool:
    return user is not None and getattr(user, "is_authenticated", False)


def billing_org_ids(user) -> list:
    """Organizations whose bills `user` may read (owner, admin, billing role), narrowed by its token."""
    return [org for org in tenancy.organization_ids_visible_to(user)
            if tenancy.org_role_of(user, org) in BILLING_ROLES]


def _usage_scope(user, qs: QuerySet) -> QuerySet:
    if not _authenticated(user):
        return qs.none()
    if tenancy.is_staff(user):
        return qs
    return qs.filter(Q(organization_id__in=billing_org_ids(user))
                     | Q(project_id__in=tenancy.project_list_visible_to(user).values("id")))


def usage_record_list_visible_to(user) -> QuerySet[UsageRecord]:
    return _usage_scope(user, UsageRecord.objects.all())


def sla_report_list_visible_to(user) -> QuerySet[SlaReport]:
    return _usage_scope(user, SlaReport.objects.all())


def invoice_list_visible_to(user) -> QuerySet[Invoice]:
    qs = Invoice.objects.select_related("organization")
    if not _authenticated(user):
        return qs.none()
    if tenancy.is_staff(user):
        return qs
    return qs.filter(organization_id__in=billing_org_ids(user)).exclude(status=InvoiceStatus.DRAFT)


def credit_note_list_visible_to(user) -> QuerySet[CreditNote]:
    qs = CreditNote.objects.select_related("invoice")
    if not _authenticated(user):
        return qs.none()
    if tenancy.is_staff(user):
        return qs
    return qs.filter(organization_id__in=billing_org_ids(user))


def sla_tier_list_visible_to(user) -> QuerySet[SlaTier]:
    """SLA tiers are the provider's public offer: every authenticated caller reads them."""
    return SlaTier.objects.all() if _authenticated(user) else SlaTier.objects.none()


def price_book_list_visible_to(user) -> QuerySet[PriceBook]:
    return PriceBook.objects.prefetch_related("prices") if tenancy.is_staff(user) else PriceBook.objects.none()
