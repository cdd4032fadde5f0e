"""Billing API serializers: Input/Output pairs. Money is a decimal string; times are ISO 8601 UTC."""
from decimal import Decimal

from rest_framework import serializers

from apps.core.references import VisibleField
from apps.core.serializers import ModelSerializer, Serializer
from apps.tenancy.selectors import organization_list_visible_to

from ..models import (
    Adjustment,
    BillingAccount,
    CreditNote,
    Invoice,
    InvoiceLine,
    InvoiceRun,
    Price,
    PriceBook,
    SlaReport,
    SlaTier,
    TaxRate,
    UsageRecord,
)
from ..selectors import billing_organization_list_visible_to, invoice_list_visible_to
from ..states import INVOICE_TRANSITIONS, InvoiceStatus, PriceUnit, PricingModel


class UsageRecordOutput(ModelSerializer):
    seconds = serializers.FloatField(read_only=True)

    class Meta:
        model = UsageRecord
        fields = ["id", "organization", "project", "resource_type", "resource_id", "sku", "pricing_model", "sla_tier",
                  "start", "end", "seconds", "run_id", "source", "gpu_model", "gpu_equivalents", "commitment_amount",
                  "commitment_start", "commitment_end", "recorded_at"]


class InvoiceLineOutput(ModelSerializer):
    kind = serializers.CharField(read_only=True, help_text="usage | adjustment | sla_credit")

    class Meta:
        model = InvoiceLine
        fields = ["id", "kind", "project", "resource_type", "resource_id", "sku", "pricing_model", "sla_tier",
                  "gpu_model", "description", "billed_seconds", "quantity", "unit", "unit_price", "amount",
                  "tax_amount"]


class InvoiceOutput(ModelSerializer):
    display_number = serializers.CharField(read_only=True)
    amount_paid = serializers.DecimalField(max_digits=16, decimal_places=2, read_only=True,
                                           help_text="what the payment covered; 0 unless paid")
    balance_due = serializers.DecimalField(
        max_digits=16, decimal_places=2, read_only=True,
        help_text="total - credited - amount_paid: 0 once paid, negative (credit owed) for a credit note "
                  "issued against a paid invoice")
    lines = InvoiceLineOutput(many=True, read_only=True)
    allowed_actions = serializers.SerializerMethodField(help_text=(
        "what the caller may do to the invoice now: `finalize` (a draft whose period has ended), `pay`, `void` (a "
        "finalized invoice; void only without credit notes), `credit_note` (a finalized or paid invoice not "
        "wholly credited); for a billing admin with a write-scoped credential, empty for anyone else. The server "
        "still decides (a finalize can meet `unpriced_usage`)."))

    def get_allowed_actions(self, invoice) -> list[str]:
        from apps.core.clock import now
        from apps.identity.permissions import IsStaffBillingAdmin, token_allows_write

        request = self.context.get("request")
        user = getattr(request, "user", None)
        if request is None or getattr(user, "staff_role", "") not in IsStaffBillingAdmin.write_roles \
                or not token_allows_write(request):
            return []
        actions = [name for name, (sources, _target) in INVOICE_TRANSITIONS.items() if invoice.status in sources]
        if "finalize" in actions and invoice.period_end > now():
            actions.remove("finalize")
        if "void" in actions and invoice.credited:
            actions.remove("void")
        if invoice.status in (InvoiceStatus.FINALIZED, InvoiceStatus.PAID) and invoice.credited < invoice.total:
            actions.append("credit_note")
        return actions

    class Meta:
        model = Invoice
        fields = ["id", "organization", "period", "period_start", "period_end", "timezone", "currency", "status",
                  "number", "display_number", "tax_rate", "reverse_charge", "subtotal", "credits", "tax", "total",
                  "credited", "amount_paid", "balance_due", "unpriced_seconds", "finalized_at", "paid_at",
                  "payment_reference", "voided_at", "allowed_actions", "lines"]


class InvoicePreviewQuery(Serializer):
    organization = VisibleField(billing_organization_list_visible_to,
                                help_text="an organization whose bills the caller reads (owner, admin, billing)")


class InvoicePreviewOutput(Serializer):
    """The month-to-date estimate (`services.invoice_preview`): the current month's invoice as a run would compute
    it now. `status` is `draft` for an estimate, or the invoice's own once the month is finalized."""

    organization = serializers.UUIDField(source="organization_id")
    period = serializers.CharField()
    period_start = serializers.DateTimeField()
    period_end = serializers.DateTimeField()
    timezone = serializers.CharField()
    currency = serializers.CharField()
    status = serializers.CharField()
    tax_rate = serializers.DecimalField(max_digits=7, decimal_places=5)
    subtotal = serializers.DecimalField(max_digits=16, decimal_places=2)
    credits = serializers.DecimalField(max_digits=16, decimal_places=2)
    tax = serializers.DecimalField(max_digits=16, decimal_places=2)
    total = serializers.DecimalField(max_digits=16, decimal_places=2)
    unpriced_seconds = serializers.DecimalField(max_digits=20, decimal_places=6,
                                                help_text="usage without a price (not in the total)")
    usage_until = serializers.DateTimeField(allow_null=True,
                                            help_text="end of the latest usage record of the month; null when none")
    lines = InvoiceLineOutput(many=True)


class InvoicePayInput(Serializer):
    amount = serializers.DecimalField(max_digits=16, decimal_places=2)
    reference = serializers.CharField(max_length=200, required=False, default="")


class InvoiceVoidInput(Serializer):
    reason = serializers.CharField(max_length=500)


class CreditNoteOutput(ModelSerializer):
    display_number = serializers.CharField(read_only=True)

    class Meta:
        model = CreditNote
        fields = ["id", "invoice", "organization", "number", "display_number", "currency", "amount", "tax", "total",
                  "reason", "issued_at"]


class CreditNoteCreateInput(Serializer):
    invoice = VisibleField(invoice_list_visible_to)
    amount = serializers.DecimalField(max_digits=16, decimal_places=2)
    reason = serializers.CharField(max_length=500)


class SlaReportOutput(ModelSerializer):
    applied_invoice_number = serializers.CharField(
        source="applied_invoice.display_number", read_only=True, allow_null=True,
        help_text="the number of the invoice the credit is on (e.g. INV-00000002); empty while that invoice is a "
                  "draft, null before an invoice takes the credit")

    class Meta:
        model = SlaReport
        fields = ["id", "organization", "project", "resource_type", "resource_id", "sla_tier", "period",
                  "held_minutes", "downtime_minutes", "uptime_pct", "target_uptime_pct", "credit_pct",
                  "billed_amount", "credit_amount", "currency", "source_invoice", "applied_invoice",
                  "applied_invoice_number"]


class CreditStep(Serializer):
    below = serializers.DecimalField(max_digits=7, decimal_places=4)
    credit_pct = serializers.DecimalField(max_digits=6, decimal_places=2)


class SlaTierOutput(ModelSerializer):
    credit_schedule = CreditStep(many=True)

    class Meta:
        model = SlaTier
        fields = ["id", "code", "name", "target_uptime_pct", "credit_schedule", "support_response_minutes",
                  "description"]


class SlaTierCreateInput(Serializer):
    code = serializers.SlugField(max_length=32)
    name = serializers.CharField(max_length=100)
    target_uptime_pct = serializers.DecimalField(max_digits=7, decimal_places=4, min_value=0, max_value=100)
    credit_schedule = CreditStep(many=True)
    support_response_minutes = serializers.IntegerField(min_value=0)
    description = serializers.CharField(required=False, default="", allow_blank=True)


class SlaTierUpdateInput(Serializer):
    name = serializers.CharField(max_length=100, required=False)
    target_uptime_pct = serializers.DecimalField(max_digits=7, decimal_places=4, min_value=0, max_value=100,
                                                 required=False)
    credit_schedule = CreditStep(many=True, required=False)
    support_response_minutes = serializers.IntegerField(min_value=0, required=False)
    description = serializers.CharField(required=False, allow_blank=True)


class PriceOutput(ModelSerializer):
    currency = serializers.CharField(source="book.currency", read_only=True, help_text="ISO 4217, the book's")
    effective_from = serializers.DateTimeField(source="book.effective_from", read_only=True)

    class Meta:
        model = Price
        fields = ["id", "book", "sku", "sla_tier", "pricing_model", "currency", "unit", "unit_price",
                  "billing_increment_seconds", "minimum_seconds", "effective_from"]


class PriceBookOutput(ModelSerializer):
    prices = PriceOutput(many=True, read_only=True)

    class Meta:
        model = PriceBook
        fields = ["id", "name", "currency", "effective_from", "notes", "prices"]


class PriceSetInput(Serializer):
    sku = serializers.CharField(max_length=200)
    sla_tier = serializers.CharField(max_length=32)
    pricing_model = serializers.ChoiceField(choices=PricingModel.choices)
    unit = serializers.ChoiceField(choices=PriceUnit.choices, default=PriceUnit.HOUR)
    unit_price = serializers.DecimalField(max_digits=18, decimal_places=6, min_value=0)
    billing_increment_seconds = serializers.IntegerField(min_value=1, default=1)
    minimum_seconds = serializers.IntegerField(min_value=0, default=60)


class PriceBookCreateInput(Serializer):
    name = serializers.CharField(max_length=200)
    currency = serializers.CharField(max_length=3)
    effective_from = serializers.DateTimeField()
    notes = serializers.CharField(required=False, default="", allow_blank=True)
    prices = PriceSetInput(many=True, required=False, default=list, max_length=2000,
                           help_text="the book's prices, created with it in one transaction (a new version of "
                                     "the price list: only the keys it changes; the others stay in force from "
                                     "the earlier books)")


class InvoiceRunOutput(ModelSerializer):
    class Meta:
        model = InvoiceRun
        fields = ["id", "period", "status", "finalize", "created_at", "finished_at", "invoices_drafted",
                  "invoices_finalized", "held_invoices", "error", "operation"]


class InvoiceRunCreateInput(Serializer):
    period = serializers.RegexField(r"^\d{4}-(0[1-9]|1[0-2])$")
    finalize = serializers.BooleanField(default=True)


class RerateInput(Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()


class AdjustmentOutput(ModelSerializer):
    class Meta:
        model = Adjustment
        fields = ["id", "organization", "period", "amount", "description", "recurring", "created_at"]


class AdjustmentCreateInput(Serializer):
    organization = VisibleField(organization_list_visible_to)
    period = serializers.RegexField(r"^\d{4}-(0[1-9]|1[0-2])$")
    amount = serializers.DecimalField(max_digits=16, decimal_places=2)
    description = serializers.CharField(max_length=300)
    recurring = serializers.BooleanField(default=False)


class RevenueRow(Serializer):
    key = serializers.CharField()
    currency = serializers.CharField()
    amount = serializers.DecimalField(max_digits=20, decimal_places=2)


class UtilizationRow(Serializer):
    key = serializers.CharField()
    gpu_hours = serializers.DecimalField(max_digits=20, decimal_places=4)


class RevenueQuery(Serializer):
    period_from = serializers.RegexField(r"^\d{4}-(0[1-9]|1[0-2])$")
    period_to = serializers.RegexField(r"^\d{4}-(0[1-9]|1[0-2])$")
    group_by = serializers.ChoiceField(choices=["gpu_model", "organization"], default="organization")


class UtilizationQuery(Serializer):
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    group_by = serializers.ChoiceField(choices=["gpu_model", "organization"], default="organization")


class BillingAccountOutput(ModelSerializer):
    class Meta:
        model = BillingAccount
        fields = ["id", "organization", "tax_rate", "tax_id", "address", "country", "region", "updated_at"]


class BillingAccountSetInput(Serializer):
    organization = VisibleField(organization_list_visible_to)
    tax_rate = serializers.DecimalField(max_digits=7, decimal_places=5, min_value=Decimal(0), max_value=Decimal("0.99999"),
                                        required=False, allow_null=True)
    tax_id = serializers.CharField(max_length=64, required=False, allow_blank=True)
    address = serializers.CharField(required=False, allow_blank=True)
    country = serializers.CharField(max_length=2, required=False, allow_blank=True,
                                    help_text="ISO 3166-1 alpha-2 billing country; empty clears")
    region = serializers.CharField(max_length=6, required=False, allow_blank=True,
                                   help_text="ISO 3166-2 subdivision of the country, e.g. US-CA")


class TaxRateOutput(ModelSerializer):
    class Meta:
        model = TaxRate
        fields = ["id", "country", "region", "name", "rate", "effective_from", "effective_to", "source",
                  "created_at"]


class TaxRateCreateInput(Serializer):
    country = serializers.CharField(max_length=2, help_text="ISO 3166-1 alpha-2")
    region = serializers.CharField(max_length=6, required=False, default="", allow_blank=True,
                                   help_text="ISO 3166-2 subdivision; empty = the whole country")
    name = serializers.CharField(max_length=64, help_text='e.g. "VAT"')
    rate = serializers.DecimalField(max_digits=6, decimal_places=3, min_value=Decimal(0),
                                    max_value=Decimal("99.999"), help_text="percent: 19.000 = 19 %")
    effective_from = serializers.DateField()
    effective_to = serializers.DateField(required=False, allow_null=True, default=None,
                                         help_text="first day no longer in force; null = open-ended")
    source = serializers.CharField(max_length=300, required=False, default="", allow_blank=True)


# --- an incident's downtime and credits (admin portal) ---------------------------------------------------------------
class IncidentCreditOutput(Serializer):
    period = serializers.CharField(help_text="YYYY-MM")
    currency = serializers.CharField()
    credit_amount = serializers.CharField(help_text="this incident's share of the month's SLA credit (2 decimals)")
    report_credit_amount = serializers.CharField(help_text="the month's whole SLA credit of the resource")
    credit_pct = serializers.CharField()
    uptime_pct = serializers.CharField()
    sla_report = serializers.UUIDField()
    applied_invoice = serializers.UUIDField(allow_null=True, help_text="the invoice it is credited on, once applied")


class IncidentResourceOutput(Serializer):
    resource_type = serializers.CharField(help_text="instance, lease, ...")
    resource_id = serializers.CharField()
    partial = serializers.BooleanField(help_text="only a part of the resource ran there (one allocation of a lease)")
    organization = serializers.UUIDField(allow_null=True, help_text="from its usage records; null before any")
    organization_name = serializers.CharField()
    project = serializers.UUIDField(allow_null=True)
    downtime_s = serializers.IntegerField(help_text="seconds of the incident while the resource ran there")
    credits = IncidentCreditOutput(many=True)


class IncidentTotalOutput(Serializer):
    currency = serializers.CharField()
    amount = serializers.CharField()


class IncidentImpactOutput(Serializer):
    incident = serializers.UUIDField()
    open = serializers.BooleanField()
    counts_for_sla = serializers.BooleanField(help_text="the provider was at fault: the downtime earns SLA credits")
    downtime_s = serializers.IntegerField(help_text="the resources' downtime, summed")
    resources = IncidentResourceOutput(many=True)
    credits = IncidentTotalOutput(many=True, help_text="SLA credits it accounts for, per currency")
