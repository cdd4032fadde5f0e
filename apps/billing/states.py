"""Invoice, credit note and invoice-run states and the invoice TRANSITIONS table.

Invoice lifecycle (docs/billing.md): `draft → finalized → paid | void`. A draft is recomputed by
every invoice run; a finalized invoice is immutable (its number, lines and totals never change).
"""
from django.db import models


class InvoiceStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    FINALIZED = "finalized", "Finalized"
    PAID = "paid", "Paid"
    VOID = "void", "Void"


INVOICE_TRANSITIONS = {
    "finalize": ({InvoiceStatus.DRAFT}, InvoiceStatus.FINALIZED),
    "pay": ({InvoiceStatus.FINALIZED}, InvoiceStatus.PAID),
    "void": ({InvoiceStatus.FINALIZED}, InvoiceStatus.VOID),
}


class PricingModel(models.TextChoices):
    ON_DEMAND = "on_demand", "On demand"
    SPOT = "spot", "Spot"
    RESERVED = "reserved", "Reserved"


class PriceUnit(models.TextChoices):
    """`hour`: unit price per hour, metered per second. `month`: unit price per billing month, prorated by the
    second over the whole billing period (RW-053: divide by the whole period, not the remainder)."""

    HOUR = "hour", "Hour"
    MONTH = "month", "Month"


class LineKind(models.TextChoices):
    USAGE = "usage", "Usage"
    ADJUSTMENT = "adjustment", "Adjustment"
    SLA_CREDIT = "sla_credit", "SLA credit"


class RunStatus(models.TextChoices):
    PENDING = "pending", "Pending"  # requested through the API; its operation has not started
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
