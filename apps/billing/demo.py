"""Demo price book for `manage.py demo_load` (idempotent): illustrative USD list prices, effective 2020-01-01, for
the demo flavors (compute's demo catalog), per-GPU reserved and spot prices for lease and spot usage, public IPs
and the demo volume type's storage (storage's demo catalog: `ssd`, per GiB-month), on both default SLA tiers
(premium = standard + 20 %). The figures are examples, not recommendations. A demo book loaded before a price was
added here gets the missing prices on the next load; prices it has are never changed."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

from .models import PriceBook
from .skus import sku_for

EFFECTIVE = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
ON_DEMAND = {  # USD per hour
    sku_for("flavor", name="cpu-2"): "0.08",
    sku_for("flavor", name="h100-1x"): "2.49",
    sku_for("flavor", name="h100-8x"): "19.92",
    sku_for("flavor", name="h100-mig-3g40"): "0.99",
    sku_for("flavor", name="h200-mig-3g71"): "1.39",
    sku_for("flavor", name="l40s-vgpu-4q"): "0.35",
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
