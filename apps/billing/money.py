"""Money rules: `Decimal` only, ISO 4217 currencies, one rounding rule.

The rounding rule (documented in docs/billing.md, case RW-070 in docs/cases.md): amounts are accumulated at full precision and
rounded once per invoice line, half-up (ties away from zero) to the currency's minor unit (2 decimals for USD/EUR,
0 for JPY, as py-moneyed's ISO 4217 table gives); a line's tax is its rounded amount × the tax rate, rounded the
same way; invoice totals are sums of rounded lines, so printed lines always add up to the printed total.
"""
from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal

import moneyed
from moneyed import Money

from apps.core.errors import ValidationFailed

from .errors import Code


def currency_validate(code: str) -> str:
    """Return the upper-case ISO 4217 code; 400 `invalid_currency` when it is not one."""
    code = (code or "").upper()
    try:
        currency = moneyed.get_currency(code)
    except (moneyed.CurrencyDoesNotExist, ValueError, TypeError):
        raise ValidationFailed(f"{code!r} is not an ISO 4217 currency code.", code=Code.INVALID_CURRENCY) from None
    if currency.code == "XXX":
        raise ValidationFailed(f"{code!r} is not an ISO 4217 currency code.", code=Code.INVALID_CURRENCY)
    return currency.code


#: The largest absolute amount (or unit price) the API accepts, in any currency: a line's unit price is stored
#: with 12 integer digits and an invoice's totals with 14, so a billion per amount leaves room for a month of
#: lines and their sums without overflowing what rating stores (docs/billing.md, "Amount limits").
AMOUNT_LIMIT = Decimal("999999999.99")


def amount_validate(value, *, field: str = "amount") -> Decimal:
    """Return `value` as a Decimal; 400 `amount_out_of_range` (with `errors[field]` and `limit`) when its absolute
    value is over AMOUNT_LIMIT, so nothing the API accepts overflows rating or an invoice run later. The one bound
    for adjustments, credit notes, payments and prices."""
    amount = Decimal(value)
    if not amount.is_finite() or abs(amount) > AMOUNT_LIMIT:
        message = f"{field} must be between -{AMOUNT_LIMIT} and {AMOUNT_LIMIT}."
        raise ValidationFailed(message, code=Code.AMOUNT_OUT_OF_RANGE, errors={field: [message]},
                               limit=str(AMOUNT_LIMIT))
    return amount


# CLDR territory codes that group countries (European Union, euro area, United Nations, outlying Oceania) and
# are no ISO 3166-1 country.
_NOT_COUNTRIES = frozenset({"EU", "EZ", "UN", "QO", "ZZ"})


def country_validate(code: str) -> str:
    """Return the upper-case ISO 3166-1 alpha-2 code (checked against CLDR's territories, as babel ships them);
    400 `invalid_country` when it is not one."""
    from babel import Locale

    code = (code or "").upper()
    if len(code) != 2 or code in _NOT_COUNTRIES or code not in Locale("en").territories:
        raise ValidationFailed(f"{code!r} is not an ISO 3166-1 alpha-2 country code.", code=Code.INVALID_COUNTRY)
    return code


def region_validate(region: str, country: str) -> str:
    """An ISO 3166-2 subdivision code of `country` (``US-CA``), upper case; empty stays empty."""
    region = (region or "").upper()
    if region and (not region.startswith(f"{country}-") or not 1 <= len(region) - 3 <= 3
                   or not region[3:].isalnum()):
        raise ValidationFailed(f"{region!r} is not an ISO 3166-2 subdivision of {country!r} (e.g. US-CA).",
                               code=Code.INVALID_COUNTRY)
    return region


def minor_units(code: str) -> int:
    """Decimal places of the currency's minor unit (USD 2, JPY 0, BHD 3)."""
    sub_unit = moneyed.get_currency(code).sub_unit or 1
    return len(str(sub_unit)) - 1


def round_money(amount: Decimal, currency: str) -> Decimal:
    """Round half-up (away from zero on ties) to the currency's minor unit."""
    exponent = Decimal(1).scaleb(-minor_units(currency))
    return Decimal(amount).quantize(exponent, rounding=ROUND_HALF_UP)


def line_tax(amount: Decimal, rate: Decimal, currency: str) -> Decimal:
    """Tax of one (already rounded) line: amount × rate rounded by `round_money` (RW-070 (a): 8180.00 × 9.975 %
    = 815.955 → 815.96)."""
    return round_money(Decimal(amount) * Decimal(rate), currency)


def as_money(amount: Decimal, currency: str) -> Money:
    return Money(amount, currency)


def format_money(amount: Decimal, currency: str) -> str:
    """Human formatting for CSV/PDF (e.g. "$1,656.00")."""
    from moneyed.l10n import format_money as fmt

    return fmt(Money(amount, currency), locale="en_US")


def downtime_minutes(seconds) -> Decimal:
    """Minutes of SLA downtime, each started minute counted whole (in the tenant's favour): the rounding of the SLA
    reports (`services.sla`, whose SQL applies the same rule) and of an incident's share of their credit."""
    return (Decimal(seconds) / 60).to_integral_value(rounding=ROUND_CEILING)
