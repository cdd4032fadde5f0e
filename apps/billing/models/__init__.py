"""Billing models; one module per aggregate, re-exported here."""
from .catalog import BillingAccount, Price, PriceBook, SlaTier, TaxRate
from .invoices import Adjustment, CreditNote, Invoice, InvoiceLine, InvoiceRun, NumberSequence, SlaReport
from .usage import DowntimeInterval, LateUsage, UsageRecord

__all__ = ["Adjustment", "BillingAccount", "CreditNote", "DowntimeInterval", "Invoice",
           "InvoiceLine", "InvoiceRun", "LateUsage", "NumberSequence", "Price", "PriceBook", "SlaReport", "SlaTier",
           "TaxRate", "UsageRecord"]
