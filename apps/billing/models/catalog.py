"""SLA tiers, price books and prices, per-organization billing settings."""
from django.db import models

from apps.core.models import TimestampedModel

from ..states import PriceUnit, PricingModel


class SlaTier(TimestampedModel):
    """A service level sold to tenants (docs/billing.md).

    `target_uptime_pct`: the monthly uptime the provider targets (e.g. 99.9000).
    `credit_schedule`: ``[{"below": "99.9", "credit_pct": "10"}, ...]``: when a resource's monthly uptime
    percentage is strictly below `below` (lower bounds inclusive, RW-050), the tenant is credited `credit_pct`
    percent of the resource's recurring billed amount for that month; the lowest matching `below` wins.
    `support_response_minutes`: the first-response time of support for this tier.
    """

    code = models.SlugField(max_length=32, unique=True)
    name = models.CharField(max_length=100)
    target_uptime_pct = models.DecimalField(max_digits=7, decimal_places=4)
    credit_schedule = models.JSONField(default=list)
    support_response_minutes = models.PositiveIntegerField()
    description = models.TextField(blank=True)

    def __str__(self) -> str:
        return self.code


class PriceBook(TimestampedModel):
    """A set of prices in one ISO 4217 currency, in force from `effective_from` (UTC).

    Books overlay each other: the price of (SKU, tier, pricing model) at time t comes from the latest book of the
    organization's currency with `effective_from <= t` that lists that key, so a new book needs only the prices
    that change, and usage is split at every change.
    """

    name = models.CharField(max_length=200)
    currency = models.CharField(max_length=3)
    effective_from = models.DateTimeField()
    notes = models.TextField(blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["currency", "effective_from"],
                                               name="billing_pricebook_unique_start")]
        ordering = ["currency", "effective_from"]

    def __str__(self) -> str:
        return f"{self.name} ({self.currency} from {self.effective_from:%Y-%m-%d})"


class Price(TimestampedModel):
    """One price: `unit_price` in the book's currency per `unit` for usage of `sku` on `sla_tier` under
    `pricing_model`.

    Metering per second: the seconds of each run (one start of the resource, `UsageRecord.run_id`) are rounded up
    to `billing_increment_seconds` and to at least `minimum_seconds` (RW-052: 60 s minimum per start; an hourly
    product uses increment 3600).
    """

    book = models.ForeignKey(PriceBook, on_delete=models.CASCADE, related_name="prices")
    sku = models.CharField(max_length=200)
    sla_tier = models.CharField(max_length=32)
    pricing_model = models.CharField(max_length=16, choices=PricingModel.choices)
    unit = models.CharField(max_length=8, choices=PriceUnit.choices, default=PriceUnit.HOUR)
    unit_price = models.DecimalField(max_digits=18, decimal_places=6)
    billing_increment_seconds = models.PositiveIntegerField(default=1)
    minimum_seconds = models.PositiveIntegerField(default=60)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["book", "sku", "sla_tier", "pricing_model"],
                                    name="billing_price_unique_key"),
            models.CheckConstraint(condition=models.Q(unit_price__gte=0), name="billing_price_non_negative"),
            models.CheckConstraint(condition=models.Q(billing_increment_seconds__gte=1),
                                   name="billing_price_increment_positive"),
        ]
        indexes = [models.Index(fields=["sku", "sla_tier", "pricing_model"])]


class TaxRate(TimestampedModel):
    """The sales tax (VAT, GST, ...) of a billing country, as data (docs/billing.md, "Tax").

    `country` is an ISO 3166-1 alpha-2 code, `region` an optional ISO 3166-2 subdivision (``US-CA``; empty = the
    whole country), `rate` a percentage (19.000 = 19 %). In force on the local days `effective_from` ≤ day <
    `effective_to` (null = open-ended); an invoice takes the rate in force on the last day of its period.
    """

    country = models.CharField(max_length=2)
    region = models.CharField(max_length=6, blank=True)
    name = models.CharField(max_length=64)
    rate = models.DecimalField(max_digits=6, decimal_places=3)
    effective_from = models.DateField()
    effective_to = models.DateField(null=True, blank=True)
    source = models.CharField(max_length=300, blank=True, help_text="where the rate is published")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["country", "region", "effective_from"], name="billing_taxrate_unique_start"),
            models.CheckConstraint(condition=models.Q(rate__gte=0) & models.Q(rate__lt=100),
                                   name="billing_taxrate_percent"),
            models.CheckConstraint(condition=models.Q(effective_to__isnull=True)
                                   | models.Q(effective_to__gt=models.F("effective_from")),
                                   name="billing_taxrate_window"),
        ]
        ordering = ["country", "region", "effective_from"]

    def __str__(self) -> str:
        return f"{self.country}{'/' + self.region if self.region else ''} {self.name} {self.rate} %"


class BillingAccount(TimestampedModel):
    """Billing settings of an organization beyond those on `tenancy.Organization` (currency, time zone, default
    tier live there). `tax_rate` is a fraction (0.19 = 19 %) that overrides the tax-rate table; null takes the
    `TaxRate` of `country` (and `region`), or settings.BILLING_DEFAULT_TAX_RATE when no country is set."""

    organization = models.OneToOneField("tenancy.Organization", on_delete=models.CASCADE,
                                        related_name="billing_account")
    tax_rate = models.DecimalField(max_digits=7, decimal_places=5, null=True, blank=True)
    tax_id = models.CharField(max_length=64, blank=True)
    address = models.TextField(blank=True)
    country = models.CharField(max_length=2, blank=True, help_text="ISO 3166-1 alpha-2 of the billing address")
    region = models.CharField(max_length=6, blank=True, help_text="ISO 3166-2 subdivision, e.g. US-CA")
