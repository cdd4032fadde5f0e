"""Invoices, their lines, credit notes, adjustments, SLA reports, invoice runs and number sequences."""
from decimal import Decimal

from django.conf import settings
from django.db import models

from apps.core.clock import now
from apps.core.models import TimestampedModel, UUIDModel

from .. import conf
from ..states import InvoiceStatus, LineKind, RunStatus

MONEY = {"max_digits": 16, "decimal_places": 2}


class NumberSequence(models.Model):
    """Gap-free counters (`invoice`, `credit_note`): the row is locked FOR UPDATE in the transaction that
    finalizes, so a rolled back finalization gives its numbers back and no number is used twice or skipped."""

    name = models.CharField(max_length=32, primary_key=True)
    next_value = models.BigIntegerField(default=1)


class InvoiceRun(TimestampedModel):
    """One execution of the invoice run for a billing month (`period` = "YYYY-MM" in each organization's billing
    time zone). Runs are idempotent: a rerun recomputes drafts and skips what is finalized."""

    period = models.CharField(max_length=7)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.RUNNING)
    finalize = models.BooleanField(default=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")
    finished_at = models.DateTimeField(null=True, blank=True)
    invoices_drafted = models.PositiveIntegerField(default=0)
    invoices_finalized = models.PositiveIntegerField(default=0)
    held_invoices = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    #: the operation that runs it when requested through the API (null for runs of the beat and the shell)
    operation = models.ForeignKey("operations.Operation", null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="+")


class Invoice(TimestampedModel):
    """The bill of one organization for one calendar month of its billing time zone.

    `period_start`/`period_end` are the UTC instants of local midnight on the first of the month and of the next
    month (so a month with a daylight-saving change is 743 or 745 hours long). Amounts are in `currency`:
    `subtotal` (usage and adjustments) + `credits` (SLA credits, ≤ 0) + `tax` = `total`; each is the sum of the
    rounded lines. `number` is assigned at finalization, gap-free. `unpriced_seconds` > 0 holds the invoice in
    draft (usage without a price)."""

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.PROTECT, related_name="invoices")
    period = models.CharField(max_length=7)
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    timezone = models.CharField(max_length=64)
    currency = models.CharField(max_length=3)
    status = models.CharField(max_length=16, choices=InvoiceStatus.choices, default=InvoiceStatus.DRAFT)
    number = models.BigIntegerField(null=True, blank=True, unique=True)
    tax_rate = models.DecimalField(max_digits=7, decimal_places=5, default=0)
    reverse_charge = models.BooleanField(default=False, help_text="0 % tax: the buyer accounts for it (B2B abroad)")
    subtotal = models.DecimalField(**MONEY, default=0)
    credits = models.DecimalField(**MONEY, default=0)
    tax = models.DecimalField(**MONEY, default=0)
    total = models.DecimalField(**MONEY, default=0)
    credited = models.DecimalField(**MONEY, default=0, help_text="sum of credit notes issued against it")
    unpriced_seconds = models.DecimalField(max_digits=20, decimal_places=6, default=0)
    finalized_at = models.DateTimeField(null=True, blank=True)
    paid_at = models.DateTimeField(null=True, blank=True)
    payment_reference = models.CharField(max_length=200, blank=True)
    voided_at = models.DateTimeField(null=True, blank=True)
    run = models.ForeignKey(InvoiceRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="invoices")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "period"], condition=~models.Q(status="void"),
                                    name="billing_invoice_one_per_period"),
            models.CheckConstraint(condition=models.Q(status="draft") | models.Q(number__isnull=False),
                                   name="billing_invoice_numbered_when_final"),
        ]
        indexes = [models.Index(fields=["period", "status"])]

    @property
    def display_number(self) -> str:
        return f"{conf.get('BILLING_INVOICE_PREFIX')}-{self.number:08d}" if self.number else ""

    @property
    def amount_paid(self):
        """What the payment covered: the total less the credit notes issued until it was paid (a payment is of
        the full balance due then, `services.invoice_pay`); 0 unless paid."""
        if self.status != InvoiceStatus.PAID:
            return Decimal(0)
        before = sum((n.total for n in self.credit_notes.all() if self.paid_at and n.issued_at <= self.paid_at),
                     Decimal(0))
        return self.total - before

    @property
    def balance_due(self):
        """Total − credit notes − payment: 0 once paid, negative (a credit owed to the customer) when a credit
        note is issued against a paid invoice."""
        return self.total - self.credited - self.amount_paid


class InvoiceLine(UUIDModel):
    """One line: usage of one resource and SKU at one unit price, an adjustment, or an SLA credit.

    `billed_seconds` is the metered time after minimums and increments; `quantity` the same in `unit` (hours or
    months, 6 decimals, for display); `amount` = raw amount at full precision rounded half-up to the currency's
    minor unit (the one rounding rule); `tax_amount` = amount × tax rate, rounded the same way per line."""

    invoice = models.ForeignKey(Invoice, on_delete=models.CASCADE, related_name="lines")
    kind = models.CharField(max_length=16, choices=LineKind.choices)
    project = models.ForeignKey("tenancy.Project", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    resource_type = models.CharField(max_length=32, blank=True)
    resource_id = models.CharField(max_length=64, blank=True)
    sku = models.CharField(max_length=200, blank=True)
    pricing_model = models.CharField(max_length=16, blank=True)
    sla_tier = models.CharField(max_length=32, blank=True)
    gpu_model = models.CharField(max_length=64, blank=True)
    description = models.CharField(max_length=300, blank=True)
    billed_seconds = models.DecimalField(max_digits=20, decimal_places=6, default=0)
    quantity = models.DecimalField(max_digits=20, decimal_places=6, default=0)
    unit = models.CharField(max_length=8, blank=True)
    unit_price = models.DecimalField(max_digits=18, decimal_places=6, default=0)
    raw_amount = models.DecimalField(max_digits=30, decimal_places=12, default=0)
    amount = models.DecimalField(**MONEY)
    tax_amount = models.DecimalField(**MONEY, default=0)
    sla_report = models.ForeignKey("billing.SlaReport", null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="+")
    adjustment = models.ForeignKey("billing.Adjustment", null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="+")

    class Meta:
        indexes = [models.Index(fields=["invoice", "kind"])]


class Adjustment(TimestampedModel):
    """A manual charge (amount > 0) or credit (< 0) staff add to an organization's invoice for `period`.
    `recurring=False` (one-time fees such as an upfront reservation payment) keeps it out of the SLA credit base
    (RW-050)."""

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.PROTECT, related_name="+")
    period = models.CharField(max_length=7)
    amount = models.DecimalField(**MONEY)
    description = models.CharField(max_length=300)
    recurring = models.BooleanField(default=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")


class SlaReport(TimestampedModel):
    """Monthly uptime of one resource on one SLA tier and the credit it earned.

    `uptime_pct` = 100 × (held − down) / held minutes, where held = minutes the resource was billed-for (its usage
    records) in the month and down = provider-fault downtime minutes inside them, each partial minute counted as
    down. `credit_amount` = `credit_pct` % of `billed_amount` (the resource's recurring usage lines on
    `source_invoice`), rounded half-up; it is added to the organization's next invoice (`applied_invoice`)."""

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.PROTECT, related_name="+")
    project = models.ForeignKey("tenancy.Project", on_delete=models.PROTECT, related_name="+")
    resource_type = models.CharField(max_length=32)
    resource_id = models.CharField(max_length=64)
    sla_tier = models.CharField(max_length=32)
    period = models.CharField(max_length=7)
    held_minutes = models.DecimalField(max_digits=14, decimal_places=4)
    downtime_minutes = models.DecimalField(max_digits=14, decimal_places=4)
    uptime_pct = models.DecimalField(max_digits=12, decimal_places=8)
    target_uptime_pct = models.DecimalField(max_digits=7, decimal_places=4)
    credit_pct = models.DecimalField(max_digits=6, decimal_places=2)
    billed_amount = models.DecimalField(**MONEY)
    credit_amount = models.DecimalField(**MONEY)
    currency = models.CharField(max_length=3)
    source_invoice = models.ForeignKey(Invoice, on_delete=models.PROTECT, related_name="+")
    applied_invoice = models.ForeignKey(Invoice, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["resource_type", "resource_id", "sla_tier", "period",
                                                       "organization"], name="billing_slareport_unique")]


class CreditNote(TimestampedModel):
    """A correction that reduces what a finalized invoice asks for; numbered gap-free on its own sequence.
    `amount` (> 0, before tax) and `tax` are in the invoice's currency; `total` = amount + tax."""

    invoice = models.ForeignKey(Invoice, on_delete=models.PROTECT, related_name="credit_notes")
    organization = models.ForeignKey("tenancy.Organization", on_delete=models.PROTECT, related_name="+")
    number = models.BigIntegerField(unique=True)
    currency = models.CharField(max_length=3)
    amount = models.DecimalField(**MONEY)
    tax = models.DecimalField(**MONEY)
    total = models.DecimalField(**MONEY)
    reason = models.CharField(max_length=500)
    issued_at = models.DateTimeField(default=now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    @property
    def display_number(self) -> str:
        return f"{conf.get('BILLING_CREDIT_NOTE_PREFIX')}-{self.number:08d}"

