"""Billing models; one module per aggregate, re-exported here."""
from .catalog import BillingAccount, Price, PriceBook, SlaTier
from .invoices import (
                       Adjustment,
                       CreditNote,
                       IdempotencyRecord,
                       Invoice,
                       InvoiceLine,
                       InvoiceRun,
                       NumberSequence,
                       SlaReport,
)
from .usage import DowntimeInterval, LateUsage, UsageRecord

__all__ = ["Adjustment", "BillingAccount", "CreditNote", "DowntimeInterval", "IdempotencyRecord", "Invoice",
           "InvoiceLine", "InvoiceRun", "LateUsage", "NumberSequence", "Price", "PriceBook", "SlaReport", "SlaTier",
           "UsageRecord"]
