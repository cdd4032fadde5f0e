"""Billing services (writes). Keyword-only, `actor` first; `actor=None` is the system (beat tasks, demo, bench)."""
from .catalog import (
    billing_account_update,
    price_book_create,
    price_set,
    sla_tier_create,
    sla_tier_update,
    tax_rate_create,
    tax_rates_load,
)
from .invoicing import (
                        adjustment_create,
                        adjustment_delete,
                        credit_note_create,
                        invoice_finalize,
                        invoice_pay,
                        invoice_preview,
                        invoice_run_execute,
                        invoice_run_request,
                        invoice_void,
                        usage_rerate,
)
from .metering import downtime_sync, usage_record_collect, usage_record_ingest

__all__ = ["adjustment_create", "adjustment_delete", "billing_account_update", "credit_note_create", "downtime_sync", "invoice_finalize",
           "invoice_pay", "invoice_preview", "invoice_run_execute", "invoice_run_request", "invoice_void", "price_book_create", "price_set",
           "sla_tier_create", "sla_tier_update", "tax_rate_create", "tax_rates_load", "usage_record_collect", "usage_record_ingest", "usage_rerate"]
