"""What billing plugs into other apps, registered once from `BillingConfig.ready`: the invoice-run workflow
``billing.invoice_run`` with the operations step runner (`workflows`)."""
from __future__ import annotations


def register() -> None:
    from . import workflows  # noqa: F401  (its module body registers the invoice-run workflow)
