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

import datetime as dt
from decimal import ROUND_HALF_UP, Decimal

from django.db.models import Q, QuerySet

from apps.core.clock import now as clock_now
from apps.tenancy import selectors as tenancy
from apps.tenancy.models import OrgRole

from .models import (
    CreditNote,
    Invoice,
    InvoiceLine,
    Price,
    PriceBook,
    SlaReport,
    SlaTier,
    TaxRate,
    UsageRecord,
)
from .money import downtime_minutes
from .states import InvoiceStatus, PriceUnit

BILLING_ROLES = (OrgRole.OWNER, OrgRole.ADMIN, OrgRole.BILLING)


def _authenticated(user) -> bool:
    return user is not None and getattr(user, "is_authenticated", False)


def billing_org_ids(user) -> list:
    """Organizations whose bills `user` may read (owner, admin, billing role), narrowed by its token."""
    return [org for org in tenancy.organization_ids_visible_to(user)
            if tenancy.org_role_of(user, org) in BILLING_ROLES]


def billing_organization_list_visible_to(user) -> QuerySet:
    """Organizations whose bills and spend estimate `user` may read: every one for staff, else `billing_org_ids`."""
    from apps.tenancy.models import Organization

    if not _authenticated(user):
        return Organization.objects.none()
    if tenancy.is_staff(user):
        return Organization.objects.all()
    return Organization.objects.filter(pk__in=billing_org_ids(user))


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
    return _usage_scope(user, SlaReport.objects.select_related("applied_invoice"))


def invoice_list_visible_to(user) -> QuerySet[Invoice]:
    qs = Invoice.objects.select_related("organization")
    if not _authenticated(user):
        return qs.none()
    if tenancy.is_staff(user):
        return qs
    return qs.filter(organization_id__in=billing_org_ids(user)).exclude(status=InvoiceStatus.DRAFT)


def invoice_line_list_visible_to(user) -> QuerySet[InvoiceLine]:
    """Lines of the invoices `user` may read (`invoice_list_visible_to`)."""
    return InvoiceLine.objects.select_related("invoice").filter(invoice__in=invoice_list_visible_to(user))


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


def sla_tier_resolve(*, organization, code: str | None = None) -> str:
    """The SLA tier code a resource of `organization` is bought at (instances, clusters, leases): `code` when
    given, else the organization's `default_sla_tier`. Usage records of the resource carry it, so rating prices it
    at that tier and SLA reports apply that tier's target and credit schedule (docs/billing.md). 400
    `unknown_sla_tier` (field ``sla_tier``) when no `SlaTier` has `code`."""
    from apps.core.errors import ValidationFailed

    from .errors import Code

    if not code:
        return organization.default_sla_tier
    if not SlaTier.objects.filter(code=code).exists():
        raise ValidationFailed(f"Unknown SLA tier {code!r}.", code=Code.UNKNOWN_SLA_TIER,
                               errors={"sla_tier": [f"unknown SLA tier {code!r}"]})
    return code


def price_book_list_visible_to(user) -> QuerySet[PriceBook]:
    """Price books: all of them for staff; none for tenants (a tenant reads prices, `price_list_visible_to`)."""
    return PriceBook.objects.prefetch_related("prices") if tenancy.is_staff(user) else PriceBook.objects.none()


def tax_rate_list_visible_to(user) -> QuerySet[TaxRate]:
    """Tax rates: all of them for staff; none for tenants (an invoice shows the rate it was billed at)."""
    return TaxRate.objects.all() if tenancy.is_staff(user) else TaxRate.objects.none()


def _price_keys(user) -> set[tuple[str, str]]:
    """(currency, SLA tier) of every organization `user` can see (narrowed by its token): the price lists that
    apply to it (rating and `price_quote` price an organization at its currency and default tier)."""
    from apps.tenancy.models import Organization

    return set(Organization.objects.filter(pk__in=tenancy.organization_ids_visible_to(user))
               .values_list("currency", "default_sla_tier"))


def price_list_visible_to(user) -> QuerySet[Price]:
    """Prices `user` may read (docs/adr/0603-tenant-price-list.md).

    Staff: every price of every book. A tenant: for each organization it can see, the prices in force now
    (`price_effective`'s rule: per (SKU, pricing model) the latest book of the organization's currency with
    ``effective_from <= now``) at the organization's currency and default SLA tier. Prices of other currencies or
    tiers, superseded prices and books not yet in force are absent (404 on one, never listed)."""
    from apps.core import clock

    qs = Price.objects.select_related("book")
    if not _authenticated(user):
        return qs.none()
    if tenancy.is_staff(user):
        return qs
    keys = _price_keys(user)
    if not keys:
        return qs.none()
    match = Q()
    for currency, tier in keys:
        match |= Q(book__currency=currency, sla_tier=tier)
    effective = (Price.objects.filter(match, book__effective_from__lte=clock.now())
                 .order_by("book__currency", "sku", "sla_tier", "pricing_model", "-book__effective_from")
                 .distinct("book__currency", "sku", "sla_tier", "pricing_model").values("id"))
    return qs.filter(id__in=effective)


# ---- price lookup (launch checks, flavor lists) -----------------------------------------------------------------
#: Hours a `month`-unit price is spread over for an hourly figure (365.25 × 24 / 12; an estimate: invoices prorate
#: by the seconds of the real billing period, RW-053).
HOURS_PER_MONTH = Decimal("730.5")


def price_effective(*, currency: str, sku: str, sla_tier: str, pricing_model: str,
                    at: dt.datetime | None = None) -> Price | None:
    """The price rating would apply to usage of (`sku`, `sla_tier`, `pricing_model`) at `at` (default now): the
    latest book of `currency` with ``effective_from <= at`` that lists that key (books overlay, docs/billing.md);
    None when no book lists it."""
    from apps.core import clock

    return (Price.objects.filter(book__currency=currency, book__effective_from__lte=at or clock.now(), sku=sku,
                                 sla_tier=sla_tier, pricing_model=pricing_model)
            .select_related("book").order_by("-book__effective_from").first())


def prices_effective(*, skus, currencies, at: dt.datetime | None = None) -> dict[tuple[str, str, str, str], Price]:
    """``{(currency, sku, sla_tier, pricing_model): Price}``: for every key of `skus` × `currencies` that a book
    lists, the price `price_effective` gives at `at` (default now). One query (a page of flavors)."""
    from apps.core import clock

    if not skus or not currencies:
        return {}
    rows = (Price.objects.filter(sku__in=set(skus), book__currency__in=set(currencies),
                                 book__effective_from__lte=at or clock.now())
            .select_related("book")
            .order_by("book__currency", "sku", "sla_tier", "pricing_model", "-book__effective_from")
            .distinct("book__currency", "sku", "sla_tier", "pricing_model"))
    return {(p.book.currency, p.sku, p.sla_tier, p.pricing_model): p for p in rows}


def price_per_hour(price: Price | None, units: Decimal | int = 1) -> Decimal | None:
    """unit_price × `units` per hour (a `month` price over `HOURS_PER_MONTH`); None without a price."""
    if price is None:
        return None
    per_hour = price.unit_price * Decimal(units)
    return per_hour / HOURS_PER_MONTH if price.unit == PriceUnit.MONTH else per_hour


def decimal_text(value) -> str | None:
    """A decimal string of at most 6 places, without trailing zeros ("2.5", "100"); None stays None."""
    return _text(value)


def price_quote(*, organization, sku: str, pricing_model: str, units: Decimal | int = 1,
                hours: Decimal | None = None, at: dt.datetime | None = None, sla_tier: str = "") -> dict:
    """What `units` of `sku` cost `organization` per hour under `pricing_model`, at its currency and `sla_tier`
    (default: its default SLA tier), from the effective price book (`price_effective`)::

        {"currency": "USD", "sla_tier": "standard", "pricing_model": "on_demand", "sku": str,
         "unit": "hour" | "month" | null, "unit_price": "decimal string" | null, "units": "decimal string",
         "per_hour": "decimal string" | null, "hours": "decimal string" | null,
         "estimate_total": "decimal string" | null}

    ``per_hour`` = unit_price × units (a monthly price over `HOURS_PER_MONTH`), full precision; null when no
    book prices the key. ``estimate_total`` = per_hour × `hours` rounded half-up to the currency's minor unit
    (`money.round_money`), null without `hours`. An estimate: invoices also apply billing increments, minimum
    charges and provider-fault downtime (docs/billing.md)."""
    from .money import round_money

    currency, tier = organization.currency, sla_tier or organization.default_sla_tier
    price = price_effective(currency=currency, sku=sku, sla_tier=tier, pricing_model=pricing_model, at=at)
    units = Decimal(units)
    per_hour = price_per_hour(price, units)
    total = round_money(per_hour * hours, currency) if per_hour is not None and hours is not None else None
    return {"currency": currency, "sla_tier": tier, "pricing_model": pricing_model, "sku": sku,
            "unit": price.unit if price else None, "unit_price": _text(price.unit_price if price else None),
            "units": _text(units), "per_hour": _text(per_hour), "hours": _text(hours),
            "estimate_total": None if total is None else format(total, "f")}


def _text(value) -> str | None:
    """A decimal string of at most 6 places, without trailing zeros ("2.5", "100"); None stays None."""
    if value is None:
        return None
    return format(Decimal(value).quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP).normalize(), "f")


def _months(start: dt.datetime, end: dt.datetime) -> list[tuple[str, dt.datetime, dt.datetime]]:
    """The UTC months `[start, end)` touches: (YYYY-MM, month start, month end)."""
    out, cur = [], dt.datetime(start.year, start.month, 1, tzinfo=dt.UTC)
    while cur < end:
        nxt = dt.datetime(cur.year + cur.month // 12, cur.month % 12 + 1, 1, tzinfo=dt.UTC)
        out.append((f"{cur.year:04d}-{cur.month:02d}", cur, nxt))
        cur = nxt
    return out


def _union_seconds(spans: list[tuple[dt.datetime, dt.datetime]], lo: dt.datetime, hi: dt.datetime) -> Decimal:
    """Seconds of `[lo, hi)` covered by the union of `spans`, exact to the microsecond (the SLA report rounds
    minutes up from exact seconds, so cutting them to whole seconds first would lose a sub-second incident)."""
    total, reach = 0, lo
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in spans):
        if e <= reach:
            continue
        total += (e - max(s, reach)) // dt.timedelta(microseconds=1)
        reach = e
    return Decimal(total) / 1_000_000


def incident_impact(incident) -> dict:
    """What an inventory incident cost: the resources that ran on its host (or GPU) while it lasted, each with its
    downtime, and the SLA credits it accounts for. Read-only; worked out from the placement resolvers now, so an
    open incident's figures grow until it closes.

    ``downtime_s`` per resource: seconds of the incident during which the resource (``partial``: a part of it, such
    as one allocation row of a lease) was placed there. ``credits``: per month with an SLA report of the resource
    (made by the month's invoice run), the report's credit times this incident's share of the month's downtime
    (its minutes, each started minute whole as in the report, over the report's; capped at 1; several incidents
    of a month share its credit). An incident not at the provider's fault causes
    downtime but no credit (``counts_for_sla`` false). Totals: ``downtime_s`` (summed over resources) and
    ``credits`` per currency, amounts as 2-decimal strings."""
    from .registry import placement_resolvers

    end = incident.end or clock_now()
    spans: dict[tuple[str, str], dict] = {}
    for resolver in placement_resolvers().values():
        for p in resolver(incident.host_id, incident.gpu_id, incident.start, end):
            s, e = max(incident.start, p.start), min(end, p.end or end)
            if e <= s:
                continue
            row = spans.setdefault((p.resource_type, str(p.resource_id)),
                                   {"spans": [], "partial": False, "project": p.project_id})
            row["spans"].append((s, e))
            row["partial"] |= p.units is not None
    owners = {}
    if spans:
        q = Q()
        for rtype, rid in spans:
            q |= Q(resource_type=rtype, resource_id=rid)
        for r in (UsageRecord.objects.filter(q).order_by("resource_type", "resource_id", "-start")
                  .distinct("resource_type", "resource_id")
                  .values("resource_type", "resource_id", "organization_id", "organization__name", "project_id")):
            owners[(r["resource_type"], r["resource_id"])] = r
        # not metered yet (the incident came before the resource's first usage period): its placement's project
        unmetered = {row["project"] for key, row in spans.items() if key not in owners and row["project"]}
        if unmetered:
            from apps.tenancy.models import Project

            projects = {str(p["id"]): p for p in Project.objects.filter(pk__in=unmetered)
                        .values("id", "organization_id", "organization__name")}
            for key, row in spans.items():
                project = projects.get(row["project"])
                if key not in owners and project:
                    owners[key] = {"organization_id": project["organization_id"], "project_id": project["id"],
                                   "organization__name": project["organization__name"]}
    months = _months(incident.start, end)
    reports = {}
    if spans and incident.provider_at_fault:
        for rep in SlaReport.objects.filter(q, period__in=[m for m, _, _ in months]):
            reports.setdefault((rep.resource_type, rep.resource_id), []).append(rep)
    resources, totals = [], {}
    for (rtype, rid), row in sorted(spans.items()):
        owner = owners.get((rtype, rid), {})
        credits = []
        for rep in sorted(reports.get((rtype, rid), []), key=lambda r: r.period):
            _, lo, hi = next(m for m in months if m[0] == rep.period)
            # minutes as the report counts them (each started minute whole), so an incident that is the month's
            # only downtime carries the whole credit, not its exact seconds over the rounded-up minutes
            down_min = downtime_minutes(_union_seconds(row["spans"], lo, hi))
            share = min(Decimal(1), down_min / rep.downtime_minutes) if rep.downtime_minutes else Decimal(0)
            amount = (rep.credit_amount * share).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
            totals[rep.currency] = totals.get(rep.currency, Decimal(0)) + amount
            credits.append({"period": rep.period, "currency": rep.currency, "credit_amount": str(amount),
                            "report_credit_amount": str(rep.credit_amount), "credit_pct": str(rep.credit_pct),
                            "uptime_pct": str(rep.uptime_pct), "sla_report": str(rep.pk),
                            "applied_invoice": str(rep.applied_invoice_id) if rep.applied_invoice_id else None})
        resources.append({"resource_type": rtype, "resource_id": rid, "partial": row["partial"],
                          "organization": str(owner["organization_id"]) if owner else None,
                          "organization_name": owner.get("organization__name", ""),
                          "project": str(owner["project_id"]) if owner else None,
                          "downtime_s": int(_union_seconds(row["spans"], incident.start, end)), "credits": credits})
    return {"incident": str(incident.pk), "open": incident.end is None,
            "counts_for_sla": incident.provider_at_fault,
            "downtime_s": sum(r["downtime_s"] for r in resources), "resources": resources,
            "credits": [{"currency": c, "amount": str(a)} for c, a in sorted(totals.items())]}
