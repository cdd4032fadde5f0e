"""Demo price book for `manage.py demo_load` (idempotent): illustrative USD list prices, effective 2020-01-01, for the
demo flavors (compute's demo catalog, and bare metal's `bm-h100-8x`), per-GPU reserved and spot prices for lease and
spot usage, public IPs and the demo volume type's storage (storage's demo catalog: `ssd`, per GiB-month), on both
default SLA tiers (premium = standard + 20 %). The figures are examples, not recommendations. A demo book loaded
before a price was added here gets the missing prices on the next load; prices it has are never changed.

Then the demo tenant's closed months (`load_demo_months`): the usage of the two calendar months before the load's
(compute's demo instance that ran through them, its GPU down 9 h by a provider fault in the first) is metered into
usage records by the recorder, and the first month is invoiced by the invoice run (finalized, with its SLA report),
so the invoice run for last month, left to the provider's billing staff, drafts an invoice with that month's usage
and the first month's SLA credit (docs/admin-portal.md, "Trying billing")."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

from apps.core.clock import now

from .models import Invoice, PriceBook, UsageRecord
from .periods import period_bounds, period_of, previous_period
from .skus import sku_for
from .states import InvoiceStatus

EFFECTIVE = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
ON_DEMAND = {  # USD per hour
    sku_for("flavor", name="cpu-2"): "0.08",
    sku_for("flavor", name="h100-1x"): "2.49",
    sku_for("flavor", name="h100-8x"): "19.92",
    sku_for("flavor", name="h100-mig-3g40"): "0.99",
    sku_for("flavor", name="h200-mig-3g71"): "1.39",
    sku_for("flavor", name="l40s-vgpu-4q"): "0.35",
    sku_for("flavor", name="bm-h100-8x"): "21.12",  # bare metal's demo flavor (apps.baremetal.demo): a whole host
    sku_for("public_ip"): "0.005",
}
PER_GPU = {"H100-SXM5-80GB": ("1.79", "1.10"), "H200-SXM-141GB": ("2.29", "1.45"), "L40S": ("0.69", "0.45")}
PER_GIB_MONTH = {  # USD per GiB-month, prorated by the second (docs/storage.md, "Pricing and metering")
    sku_for("volume", type="ssd"): "0.10",
}


def _prices():
    """(sku, tier, pricing model, unit price, price_set's other arguments) of every demo price."""
    for tier, factor in (("standard", Decimal(1)), ("premium", Decimal("1.2"))):
        for sku, price in ON_DEMAND.items():
            yield sku, tier, "on_demand", Decimal(price) * factor, {}
        for model, (reserved, spot) in PER_GPU.items():
            gpu = sku_for("gpu", model=model)
            yield gpu, tier, "reserved", Decimal(reserved) * factor, {"minimum_seconds": 0}
            yield gpu, tier, "spot", Decimal(spot) * factor, {}
        for sku, price in PER_GIB_MONTH.items():
            yield sku, tier, "on_demand", Decimal(price) * factor, {"unit": "month"}


def load_demo(stdout) -> None:
    from .services import price_book_create, price_set

    book = PriceBook.objects.filter(currency="USD", effective_from=EFFECTIVE).first()
    present = book is not None
    if book is None:
        book = price_book_create(actor=None, name="Demo list prices", currency="USD", effective_from=EFFECTIVE)
    have = set(book.prices.values_list("sku", "sla_tier", "pricing_model"))
    added = 0
    for sku, tier, model, price, extra in _prices():
        if (sku, tier, model) not in have:
            price_set(actor=None, book=book, sku=sku, sla_tier=tier, pricing_model=model, unit_price=price, **extra)
            added += 1
    if present:
        stdout.write(f"billing: demo price book present ({added} missing prices added)\n")
    else:
        stdout.write(f"billing: demo price book with {book.prices.count()} prices\n")
    load_demo_months(stdout)


def load_demo_months(stdout) -> None:
    """Record the usage of every usage source over the two calendar months (UTC) before now
    (`usage_record_collect`: each metering period once), then, when the demo organization has usage in the first
    of them and no invoice of it yet, run the invoice run of that month for the demo organization alone
    (`invoice_run_execute`, finalizing). The last month is not invoiced here. Idempotent: a second load records
    nothing and runs nothing."""
    from apps.tenancy.models import Organization

    from .services import invoice_run_execute, usage_record_collect

    org = Organization.objects.filter(slug="demo").first()
    if org is None:
        return
    last = previous_period(period_of(now()))
    first = previous_period(last)
    start, end = period_bounds(first)[0], period_bounds(last)[1]
    recorded = sum(usage_record_collect(window_start=start, window_end=end).values())
    first_start, first_end = period_bounds(first, org.billing_timezone)
    invoiced = ""
    if (UsageRecord.objects.filter(organization=org, start__lt=first_end, end__gt=first_start).exists()
            and not Invoice.objects.filter(organization=org, period=first).exclude(status=InvoiceStatus.VOID).exists()):
        invoice_run_execute(actor=None, period=first, organization_ids=[org.pk])
        invoiced = f", invoice of {first} finalized"
    stdout.write(f"billing: demo usage of {first} and {last}: {recorded} usage records recorded{invoiced}; "
                 f"run the invoice run for {last} in the admin portal (/staff/billing/invoice-runs)\n")
