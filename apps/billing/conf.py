"""Billing settings, read from Django settings with defaults (override in gpucloud/settings.py or the env-driven
settings module):

- BILLING_DEFAULT_TAX_RATE (Decimal fraction, "0"): tax rate of organizations without a BillingAccount rate.
- BILLING_INVOICE_PREFIX ("INV"), BILLING_CREDIT_NOTE_PREFIX ("CN"): printed before the 8-digit number.
- BILLING_METERING_PERIOD_SECONDS (3600): usage records never cross a metering period boundary; recording and
  re-rating windows must be aligned to it (RW-059).
- BILLING_RUN_BATCH_SIZE (2000; env `BILLING_RUN_BATCH_SIZE`): organizations per invoice-run transaction (and per
  step of a run requested through the API).
- BILLING_LATE_LOOKBACK_DAYS (93): how far back late usage records are carried onto the next open invoice.
- BILLING_SELLER_NAME ("gpucloud"), BILLING_SELLER_ADDRESS (lines separated by newlines), BILLING_SELLER_TAX_ID,
  BILLING_SELLER_EMAIL (""): the seller printed on invoice and credit-note PDFs.
- BILLING_SELLER_COUNTRY ("", ISO 3166-1 alpha-2): the seller's country; a buyer with a tax id in another country
  is invoiced reverse charge (0 %). Empty: never reverse charge.
- BILLING_PAYMENT_TERMS_DAYS (30): an invoice is due this many days after it is finalized (its PDF's due date).
- BILLING_PDF_FONT, BILLING_PDF_FONT_BOLD (DejaVu Sans and DejaVu Sans Bold of Debian's fonts-dejavu-core, under
  /usr/share/fonts/truetype/dejavu/): the TrueType fonts invoice and credit-note PDFs are set in (`exports`).
"""
from decimal import Decimal

from django.conf import settings

DEJAVU_SANS = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
DEJAVU_SANS_BOLD = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"


def get(name: str):
    defaults = {
        "BILLING_DEFAULT_TAX_RATE": Decimal("0"),
        "BILLING_INVOICE_PREFIX": "INV",
        "BILLING_CREDIT_NOTE_PREFIX": "CN",
        "BILLING_METERING_PERIOD_SECONDS": 3600,
        "BILLING_RUN_BATCH_SIZE": 2000,
        "BILLING_LATE_LOOKBACK_DAYS": 93,
        "BILLING_SELLER_NAME": "gpucloud",
        "BILLING_SELLER_ADDRESS": "",
        "BILLING_SELLER_TAX_ID": "",
        "BILLING_SELLER_EMAIL": "",
        "BILLING_SELLER_COUNTRY": "",
        "BILLING_PAYMENT_TERMS_DAYS": 30,
        "BILLING_PDF_FONT": DEJAVU_SANS,
        "BILLING_PDF_FONT_BOLD": DEJAVU_SANS_BOLD,
    }
    value = getattr(settings, name, defaults[name])
    return Decimal(str(value)) if name == "BILLING_DEFAULT_TAX_RATE" else value
