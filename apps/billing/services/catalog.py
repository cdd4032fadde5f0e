"""SLA tiers, price books and prices (staff: billing admins). Rules: docs/billing.md."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal, InvalidOperation

from django.db import IntegrityError, transaction

from apps.audit.services import audit_record
from apps.core.errors import Conflict, ValidationFailed
from apps.tenancy.authz import authorize_staff

from ..errors import Code
from ..models import BillingAccount, Price, PriceBook, SlaTier
from ..money import amount_validate, currency_validate
from ..skus import sku_normalize
from ..states import PriceUnit, PricingModel

WRITERS = ("billing_admin",)


def credit_schedule_validate(schedule) -> list[dict]:
    """Normalise ``[{"below": "99.9", "credit_pct": "10"}, ...]``: `below` in (0, 100], `credit_pct` in
    (0, 100], unique `below`s, a lower `below` never credits less; sorted by `below` descending. 400
    `invalid_credit_schedule`."""
    try:
        entries = [{"below": Decimal(str(e["below"])), "credit_pct": Decimal(str(e["credit_pct"]))}
                   for e in schedule]
    except (KeyError, TypeError, InvalidOperation):
        raise ValidationFailed("Each entry needs numeric 'below' and 'credit_pct'.",
                               code=Code.INVALID_CREDIT_SCHEDULE) from None
    entries.sort(key=lambda e: e["below"], reverse=True)
    belows = [e["below"] for e in entries]
    if len(set(belows)) != len(belows) or any(not (0 < e["below"] <= 100 and 0 < e["credit_pct"] <= 100)
                                               for e in entries):
        raise ValidationFailed("'below' values must be unique in (0, 100] and 'credit_pct' in (0, 100].",
                               code=Code.INVALID_CREDIT_SCHEDULE)
    pcts = [e["credit_pct"] for e in entries]
    if pcts != sorted(pcts):
        raise ValidationFailed("A lower uptime must never earn a smaller credit.", code=Code.INVALID_CREDIT_SCHEDULE)
    return [{"below": str(e["below"]), "credit_pct": str(e["credit_pct"])} for e in entries]


def sla_tier_create(*, actor, code: str, name: str, target_uptime_pct: Decimal, credit_schedule: list,
                    support_response_minutes: int, description: str = "") -> SlaTier:
    authorize_staff(actor, WRITERS)
    schedule = credit_schedule_validate(credit_schedule)
    with transaction.atomic():
        if SlaTier.objects.filter(code=code).exists():
            raise Conflict(f"SLA tier {code!r} exists.", code="sla_tier_exists")
        tier = SlaTier.objects.create(code=code, name=name, target_uptime_pct=target_uptime_pct,
                                      credit_schedule=schedule, support_response_minutes=support_response_minutes,
                                      description=description)
        audit_record(actor=actor, action="billing.sla_tier.create", target=tier, after={"code": code})
    return tier


def sla_tier_update(*, actor, tier: SlaTier, **fields) -> SlaTier:
    """Change name, target, schedule, support time or description. Applies to SLA reports computed afterwards
    (finalized months keep theirs)."""
    authorize_staff(actor, WRITERS)
    if "credit_schedule" in fields:
        fields["credit_schedule"] = credit_schedule_validate(fields["credit_schedule"])
    before = {k: getattr(tier, k) for k in fields}
    with transaction.atomic():
        for key, value in fields.items():
            setattr(tier, key, value)
        tier.save()
        audit_record(actor=actor, action="billing.sla_tier.update", target=tier, before=before, after=fields)
    return tier


def price_book_create(*, actor, name: str, currency: str, effective_from: dt.datetime, notes: str = "") -> PriceBook:
    """A new (empty) book; add prices with `price_set`. 409 `price_book_exists` for the same currency and start.

    No invoice locks a book: books are shared by every customer of the currency, and one customer's finalized
    invoice must not stop the prices of another (docs/billing.md, "Price books"). What a finalized invoice billed
    never changes anyway (its lines are frozen by a trigger and its period is never re-rated); a book applies to
    drafts, held drafts and late usage rated after it exists."""
    authorize_staff(actor, WRITERS)
    currency = currency_validate(currency)
    book = PriceBook(name=name, currency=currency, effective_from=effective_from, notes=notes)
    try:
        with transaction.atomic():
            book.save()
            audit_record(actor=actor, action="billing.price_book.create", target=book,
                         after={"currency": currency, "effective_from": effective_from})
    except IntegrityError:
        raise Conflict("A book of this currency already starts then.", code=Code.PRICE_BOOK_EXISTS) from None
    return book


def price_set(*, actor, book: PriceBook, sku: str, sla_tier: str, pricing_model: str, unit_price: Decimal,
              unit: str = PriceUnit.HOUR, billing_increment_seconds: int = 1, minimum_seconds: int = 60) -> Price:
    """Create or replace the price of (sku, tier, model) in `book`. The SKU is normalised (`sku_normalize`).
    400 for an unknown tier, model or unit or a negative price. Never locked by an invoice (`price_book_create`)."""
    authorize_staff(actor, WRITERS)
    if not SlaTier.objects.filter(code=sla_tier).exists():
        raise ValidationFailed(f"Unknown SLA tier {sla_tier!r}.", code=Code.UNKNOWN_SLA_TIER,
                               errors={"sla_tier": ["unknown tier"]})
    if pricing_model not in PricingModel.values or unit not in PriceUnit.values:
        raise ValidationFailed("Unknown pricing model or unit.")
    amount_validate(unit_price, field="unit_price")
    if Decimal(unit_price) < 0 or billing_increment_seconds < 1 or minimum_seconds < 0:
        raise ValidationFailed("Prices, increments and minimums cannot be negative.")
    with transaction.atomic():
        price, _ = Price.objects.update_or_create(
            book=book, sku=sku_normalize(sku), sla_tier=sla_tier, pricing_model=pricing_model,
            defaults={"unit": unit, "unit_price": Decimal(unit_price),
                      "billing_increment_seconds": billing_increment_seconds, "minimum_seconds": minimum_seconds})
        audit_record(actor=actor, action="billing.price.set", target=price,
                     after={"book": str(book.pk), "sku": price.sku, "unit_price": str(unit_price)})
    return price


def billing_account_update(*, actor, organization, tax_rate: Decimal | None = None, tax_id: str | None = None,
                           address: str | None = None) -> BillingAccount:
    """Set an organization's tax rate (fraction, 0 ≤ rate < 1), tax id or address (staff billing admins)."""
    authorize_staff(actor, WRITERS)
    if tax_rate is not None and not (0 <= Decimal(tax_rate) < 1):
        raise ValidationFailed("tax_rate is a fraction in [0, 1).")
    with transaction.atomic():
        account, _ = BillingAccount.objects.get_or_create(organization=organization)
        for key, value in {"tax_rate": tax_rate, "tax_id": tax_id, "address": address}.items():
            if value is not None:
                setattr(account, key, value)
        account.save()
        audit_record(actor=actor, action="billing.account.update", target=account, organization=organization,
                     after={"tax_rate": str(account.tax_rate)})
    return account
