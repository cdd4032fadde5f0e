"""Stable error codes billing services raise (rendered as problem+json by the core handler)."""
from enum import StrEnum


class Code(StrEnum):
    INVALID_CURRENCY = "invalid_currency"
    INVALID_SKU = "invalid_sku"
    INVALID_CREDIT_SCHEDULE = "invalid_credit_schedule"
    PRICE_BOOK_EXISTS = "price_book_exists"
    UNKNOWN_USAGE_SOURCE = "unknown_usage_source"
    WINDOW_NOT_ALIGNED = "window_not_aligned"
    PERIOD_CLOSED = "period_closed"
    PERIOD_NOT_ENDED = "period_not_ended"
    INVALID_PERIOD = "invalid_period"
    PAYMENT_AMOUNT_MISMATCH = "payment_amount_mismatch"
    CREDIT_NOTE_EXCEEDS_BALANCE = "credit_note_exceeds_balance"
    INVOICE_RUN_IN_PROGRESS = "invoice_run_in_progress"
    UNPRICED_USAGE = "unpriced_usage"
    UNKNOWN_SLA_TIER = "unknown_sla_tier"
    AMOUNT_OUT_OF_RANGE = "amount_out_of_range"
    ZERO_AMOUNT = "zero_amount"
    INVOICE_HAS_CREDIT_NOTES = "invoice_has_credit_notes"
    INVALID_COUNTRY = "invalid_country"
    TAX_RATE_OVERLAP = "tax_rate_overlap"
