"""SLA tiers, price books and prices (staff: billing admins). Rules: docs/billing.md."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal, InvalidOperation

from django.db import IntegrityError, transaction

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.db import advisory_xact_lock
from apps.core.errors import Conflict, ValidationFailed
from apps.tenancy.authz import authorize_staff

from ..errors import Code
from ..models import BillingAccount, Price, PriceBook, SlaTier, TaxRate
from ..money import amount_validate, country_validate, currency_validate, region_validate
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


def price_book_create(*, actor, name: str, currency: str, effective_from: dt.datetime, notes: str = "",
                      prices: list[dict] | tuple = ()) -> PriceBook:
    """A new book, with `prices` (each `price_set`'s keyword arguments: sku, sla_tier, pricing_model, unit_price,
    unit, billing_increment_seconds, minimum_seconds) created with it in one transaction: a new version of the
    price list is published whole or not at all. A price refused is the whole book refused, its message under
    `errors["prices.<n>.<field>"]` (n counts from 0). 409 `price_book_exists` for the same currency and start
    (`errors.effective_from`): two books of a currency may not start at the same instant, as which one prices a
    key then would be undecided.

    A new version of a currency's prices starts in the future: 400 `price_book_backdated`
    (`errors.effective_from`) when staff give a start at or before now while a book of that currency exists, as it
    would re-price the usage already rated on draft invoices behind the customers' backs. The first book of a
    currency may start at any time (it prices usage that had no price yet), and the loader (`actor=None`: seeding,
    migrations) is not held to it.

    No invoice locks a book: books are shared by every customer of the currency, and one customer's finalized
    invoice must not stop the prices of another (docs/billing.md, "Price books"). What a finalized invoice billed
    never changes anyway (its lines are frozen by a trigger and its period is never re-rated); a book applies to
    drafts, held drafts and late usage rated after it exists."""
    authorize_staff(actor, WRITERS)
    currency = currency_validate(currency)
    if actor is not None and effective_from <= now() and PriceBook.objects.filter(currency=currency).exists():
        raise ValidationFailed(
            "A new version of the prices must start in the future: a start in the past would re-price usage already "
            "on draft invoices.", code=Code.PRICE_BOOK_BACKDATED,
            errors={"effective_from": ["Choose a start after now (UTC); a "
                                       f"{currency} price book is already in force."]})
    book = PriceBook(name=name, currency=currency, effective_from=effective_from, notes=notes)
    try:
        with transaction.atomic():
            book.save()
            audit_record(actor=actor, action="billing.price_book.create", target=book,
                         after={"currency": currency, "effective_from": effective_from, "prices": len(prices)})
            for n, fields in enumerate(prices):
                try:
                    price_set(actor=actor, book=book, **fields)
                except ValidationFailed as exc:
                    errors = {f"prices.{n}.{field}": messages for field, messages in (exc.errors or {}).items()}
                    raise ValidationFailed(f"Price {n + 1} ({fields.get('sku', '')}): {exc.detail}", code=exc.code,
                                           errors=errors or {f"prices.{n}": [exc.detail]}) from None
    except IntegrityError:
        when = effective_from.isoformat().replace("+00:00", "Z")
        raise Conflict("A book of this currency already starts then.", code=Code.PRICE_BOOK_EXISTS,
                       errors={"effective_from": [f"A {currency} price book already starts at {when}."]}) from None
    return book


def price_set(*, actor, book: PriceBook, sku: str, sla_tier: str, pricing_model: str, unit_price: Decimal,
              unit: str = PriceUnit.HOUR, billing_increment_seconds: int = 1,
              minimum_seconds: int = 60) -> tuple[Price, bool]:
    """Create or replace the price of (sku, tier, model) in `book`; returns (price, created: False when an existing
    price of that key was replaced). The SKU is normalised (`sku_normalize`). 400 for an unknown tier, model or
    unit or a negative price. Never locked by an invoice (`price_book_create`)."""
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
        price, created = Price.objects.update_or_create(
            book=book, sku=sku_normalize(sku), sla_tier=sla_tier, pricing_model=pricing_model,
            defaults={"unit": unit, "unit_price": Decimal(unit_price),
                      "billing_increment_seconds": billing_increment_seconds, "minimum_seconds": minimum_seconds})
        audit_record(actor=actor, action="billing.price.set", target=price,
                     after={"book": str(book.pk), "sku": price.sku, "unit_price": str(unit_price)})
    return price, created


def billing_account_update(*, actor, organization, tax_rate: Decimal | None = None, tax_id: str | None = None,
                           address: str | None = None, country: str | None = None,
                           region: str | None = None) -> tuple[BillingAccount, bool]:
    """Set an organization's tax rate (fraction, 0 ≤ rate < 1; overrides the tax-rate table), tax id, address or
    billing country (ISO 3166-1 alpha-2, "" clears) and region (ISO 3166-2) (staff billing admins), creating its
    billing account on first use; returns (account, created)."""
    authorize_staff(actor, WRITERS)
    if tax_rate is not None and not (0 <= Decimal(tax_rate) < 1):
        raise ValidationFailed("tax_rate is a fraction in [0, 1).")
    with transaction.atomic():
        account, created = BillingAccount.objects.get_or_create(organization=organization)
        if country is not None:
            account.country = country_validate(country) if country else ""
        if region is not None or country is not None:
            account.region = region_validate(account.region if region is None else region, account.country)
        for key, value in {"tax_rate": tax_rate, "tax_id": tax_id, "address": address}.items():
            if value is not None:
                setattr(account, key, value)
        account.save()
        audit_record(actor=actor, action="billing.account.update", target=account, organization=organization,
                     after={"tax_rate": str(account.tax_rate), "country": account.country,
                            "region": account.region})
    return account, created


def tax_rate_create(*, actor, country: str, name: str, rate: Decimal, effective_from: dt.date,
                    effective_to: dt.date | None = None, region: str = "", source: str = "") -> TaxRate:
    """Add a tax rate (percent, 0 ≤ rate < 100) of a country (or one ISO 3166-2 region of it) for the local days
    [effective_from, effective_to) (staff billing admins; `actor=None` is the loader). A window that overlaps
    another rate of the same country and region is 409 `tax_rate_overlap`: end the old rate first (a new row),
    so an invoice's rate is never ambiguous."""
    if actor is not None:
        authorize_staff(actor, WRITERS)
    country = country_validate(country)
    region = region_validate(region, country)
    rate = Decimal(str(rate))
    if not (0 <= rate < 100):
        raise ValidationFailed("rate is a percentage in [0, 100).")
    if effective_to is not None and effective_to <= effective_from:
        raise ValidationFailed("effective_to must be after effective_from.")
    with transaction.atomic():
        # One writer per (country, region) at a time, so two overlapping creates cannot both pass the check.
        advisory_xact_lock(f"billing:tax:{country}:{region}")
        overlapping = TaxRate.objects.filter(country=country, region=region).exclude(
            effective_to__isnull=False, effective_to__lte=effective_from)
        if effective_to is not None:
            overlapping = overlapping.exclude(effective_from__gte=effective_to)
        clash = overlapping.first()
        if clash is not None:
            raise Conflict(f"{country}{'/' + region if region else ''} already has {clash.name} {clash.rate} % from "
                           f"{clash.effective_from} to {clash.effective_to or 'open-ended'}.",
                           code=Code.TAX_RATE_OVERLAP)
        tax_rate = TaxRate.objects.create(country=country, region=region, name=name, rate=rate,
                                          effective_from=effective_from, effective_to=effective_to, source=source)
        audit_record(actor=actor, action="billing.tax_rate.create", target=tax_rate,
                     after={"country": country, "region": region, "rate": str(rate),
                            "effective_from": str(effective_from)})
    return tax_rate


def tax_rates_load(rows: list[dict]) -> tuple[int, int]:
    """Load tax rates (the rows of a YAML file such as apps/billing/data/tax_rates.yaml) as the system: a row whose
    (country, region, effective_from) exists with the same name, rate and end is skipped, so loading twice adds
    nothing (a row loaded before without a `source` takes the file's); any other overlap is 409 `tax_rate_overlap`
    and nothing of the file is loaded. Returns (created, unchanged)."""
    created = unchanged = 0
    with transaction.atomic():
        for row in rows:
            country = country_validate(str(row["country"]))
            region = region_validate(str(row.get("region") or ""), country)
            effective_from, effective_to = row["effective_from"], row.get("effective_to")
            if isinstance(effective_from, str):
                effective_from = dt.date.fromisoformat(effective_from)
            if isinstance(effective_to, str):
                effective_to = dt.date.fromisoformat(effective_to)
            source = str(row.get("source") or "")
            existing = TaxRate.objects.filter(country=country, region=region, effective_from=effective_from).first()
            if (existing is not None and existing.name == row["name"] and existing.effective_to == effective_to
                    and existing.rate == Decimal(str(row["rate"]))):
                if source and not existing.source:
                    TaxRate.objects.filter(pk=existing.pk).update(source=source)
                unchanged += 1
                continue
            tax_rate_create(actor=None, country=country, region=region, name=row["name"], rate=row["rate"],
                            effective_from=effective_from, effective_to=effective_to, source=source)
            created += 1
    return created, unchanged
