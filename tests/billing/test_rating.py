"""Section G rating cases to the cent: RW-068 (price change), RW-052 (per-second minimum), RW-059 (resize),
RW-058 (numeric SKU metadata, prices >= 100), RW-070 (rounding)."""
import datetime as dt
from decimal import Decimal

import pytest

from apps.billing.models import Invoice, InvoiceLine
from apps.billing.services import invoice_run_execute, usage_rerate
from apps.billing.skus import sku_for
from apps.core.errors import ValidationFailed

from .conftest import H100, book, collect, make_org, utc

pytestmark = pytest.mark.django_db


def _invoice(org, period):
    return Invoice.objects.get(organization=org, period=period)


def test_rw068_price_change_mid_period_splits_usage(tiers, fleet):
    org, project = make_org("acme")
    book(utc(2026, 1, 1), {(H100, "standard", "on_demand"): "2.50"})
    book(utc(2026, 3, 15), {(H100, "standard", "on_demand"): "2.00"})
    fleet.run(org, project, "vm1", utc(2026, 3, 1), utc(2026, 4, 1))
    collect(utc(2026, 3, 1), utc(2026, 4, 1))
    invoice_run_execute(period="2026-03")
    invoice = _invoice(org, "2026-03")
    lines = sorted((line.quantity, line.unit_price, line.amount) for line in invoice.lines.all())
    assert lines == [(Decimal("336"), Decimal("2.5"), Decimal("840.00")),
                     (Decimal("408"), Decimal("2"), Decimal("816.00"))]
    assert invoice.total == Decimal("1656.00")


def test_rw068_variant_price_goes_down_and_back(tiers, fleet):
    org, project = make_org("acme")
    book(utc(2026, 1, 1), {(H100, "standard", "on_demand"): "2.50"})
    book(utc(2026, 3, 10), {(H100, "standard", "on_demand"): "2.00"})
    book(utc(2026, 3, 20), {(H100, "standard", "on_demand"): "2.50"})
    fleet.run(org, project, "vm1", utc(2026, 3, 1), utc(2026, 4, 1))
    collect(utc(2026, 3, 1), utc(2026, 4, 1))
    invoice_run_execute(period="2026-03")
    invoice = _invoice(org, "2026-03")
    assert sorted((line.quantity, line.amount) for line in invoice.lines.all()) == [
        (Decimal("240"), Decimal("480.00")), (Decimal("504"), Decimal("1260.00"))]  # 216 h + 288 h at $2.50
    assert invoice.total == Decimal("1740.00")


@pytest.mark.parametrize(("runs", "expected"), [
    ([45], Decimal("0.06")),          # 45 s -> 60 s minimum
    ([61], Decimal("0.06")),          # 61 s = $0.061, printed half-up to the cent
    ([20, 20], Decimal("0.12")),      # two starts, each its own 60 s minimum
])
def test_rw052_per_second_with_60s_minimum_per_start(tiers, fleet, runs, expected):
    org, project = make_org("acme")
    book(utc(2026, 1, 1), {(H100, "standard", "on_demand"): "3.60"})
    start = utc(2026, 5, 1, 10)
    for i, seconds in enumerate(runs):
        begin = start.replace(minute=i * 5)
        fleet.run(org, project, "vm1", begin, begin.replace(second=seconds) if seconds < 60
                  else begin.replace(minute=begin.minute + 1, second=seconds - 60))
    collect(utc(2026, 5, 1, 10), utc(2026, 5, 1, 11))
    invoice_run_execute(period="2026-05")
    line = _invoice(org, "2026-05").lines.get()
    assert line.amount == expected
    assert line.raw_amount == sum(max(s, 60) for s in runs) * Decimal("3.60") / 3600


def test_rw052_hourly_variant_rounds_partial_hours_up(tiers, fleet):
    org, project = make_org("acme")
    book(utc(2026, 1, 1), {(H100, "standard", "on_demand"): {"unit_price": Decimal("3.60"),
                                                            "billing_increment_seconds": 3600}})
    fleet.run(org, project, "vm1", utc(2026, 5, 1, 10), utc(2026, 5, 1, 11, 1))  # 61 min, spans two meter hours
    collect(utc(2026, 5, 1), utc(2026, 5, 2))
    invoice_run_execute(period="2026-05")
    line = _invoice(org, "2026-05").lines.get()
    assert (line.quantity, line.amount) == (Decimal("2"), Decimal("7.20"))


def test_rw059_rate_each_hour_with_the_attributes_it_had(tiers, fleet):
    org, project = make_org("acme")
    one, eight = sku_for("gpu", model="H100", gpu_count=1), sku_for("gpu", model="H100", gpu_count=8)
    book(utc(2026, 1, 1), {(one, "standard", "on_demand"): "3", (eight, "standard", "on_demand"): "24"})
    fleet.run(org, project, "vm1", utc(2026, 6, 1), utc(2026, 6, 1, 12), sku=one)
    fleet.run(org, project, "vm1", utc(2026, 6, 1, 12), utc(2026, 6, 2), sku=eight)
    collect(utc(2026, 6, 1), utc(2026, 6, 2))
    invoice_run_execute(period="2026-06", finalize=False)
    assert _invoice(org, "2026-06").total == Decimal("324.00")
    with pytest.raises(ValidationFailed) as exc:
        usage_rerate(actor=None, window_start=utc(2026, 6, 1, 10, 30), window_end=utc(2026, 6, 1, 11, 30))
    assert exc.value.code == "window_not_aligned"
    usage_rerate(actor=None, window_start=utc(2026, 6, 1, 10), window_end=utc(2026, 6, 1, 12))
    assert _invoice(org, "2026-06").total == Decimal("324.00")
    assert InvoiceLine.objects.filter(invoice__organization=org).count() == 2


def test_rw058_numeric_metadata_matches_string_price_and_large_prices(tiers, fleet):
    org, project = make_org("acme")
    book(utc(2026, 1, 1), {
        ("gpu:gpu_count=8", "standard", "on_demand"): "24.00",   # rule stored from text
        (sku_for("node", model="H100"), "standard", "reserved"): {"unit_price": Decimal("2499.00"), "unit": "month",
                                                                   "minimum_seconds": 0},
    })
    fleet.run(org, project, "vm8", utc(2026, 7, 1), utc(2026, 7, 1, 1), sku=sku_for("gpu", gpu_count=8))  # int 8
    fleet.run(org, project, "node1", utc(2026, 7, 1), utc(2026, 8, 1), sku=sku_for("node", model="H100"),
              model="reserved", resource_type="lease")
    collect(utc(2026, 7, 1), utc(2026, 8, 1))
    invoice_run_execute(period="2026-07")
    amounts = sorted(line.amount for line in _invoice(org, "2026-07").lines.all())
    assert amounts == [Decimal("24.00"), Decimal("2499.00")]


def test_rw070d_sub_cent_seconds_accumulate_before_rounding(tiers, fleet):
    org, project = make_org("acme")
    book(utc(2026, 1, 1), {(H100, "standard", "on_demand"): "2.49"})
    start = utc(2026, 8, 1, 9)
    for second in range(3600):  # 3,600 one-second samples of one run
        begin = start + dt.timedelta(seconds=second)
        fleet.run(org, project, "vm1", begin, begin + dt.timedelta(seconds=1), key=f"s{second}", run_key="start1")
    collect(utc(2026, 8, 1, 9), utc(2026, 8, 1, 10))
    from apps.billing.models import UsageRecord
    assert UsageRecord.objects.filter(organization=org).count() == 3600
    invoice_run_execute(period="2026-08")
    lines = list(_invoice(org, "2026-08").lines.all())
    assert sum(line.amount for line in lines) == Decimal("2.49")


def test_units_and_pricing_models_each_have_their_price(tiers, fleet):
    """A lease of 8 GPUs on a per-GPU reserved price, a spot VM and an on-demand VM of the same SKU."""
    org, project = make_org("acme")
    per_gpu = sku_for("gpu", model="H100")
    book(utc(2026, 1, 1), {(per_gpu, "standard", "reserved"): "1.80", (per_gpu, "standard", "spot"): "1.10",
                           (per_gpu, "standard", "on_demand"): "2.50"})
    fleet.run(org, project, "lease1", utc(2026, 9, 1), utc(2026, 9, 1, 10), sku=per_gpu, model="reserved",
              resource_type="lease", units=Decimal(8))
    fleet.run(org, project, "spot1", utc(2026, 9, 1), utc(2026, 9, 1, 10), sku=per_gpu, model="spot")
    fleet.run(org, project, "vm1", utc(2026, 9, 1), utc(2026, 9, 1, 10), sku=per_gpu)
    collect(utc(2026, 9, 1), utc(2026, 9, 2))
    invoice_run_execute(period="2026-09")
    lines = {line.resource_id: (line.quantity, line.unit_price, line.amount)
             for line in _invoice(org, "2026-09").lines.all()}
    assert lines == {"lease1": (Decimal(80), Decimal("1.8"), Decimal("144.00")),
                     "spot1": (Decimal(10), Decimal("1.1"), Decimal("11.00")),
                     "vm1": (Decimal(10), Decimal("2.5"), Decimal("25.00"))}


def test_a_resized_lease_rounds_each_size_duration_up_then_multiplies_by_its_gpus(tiers, fleet):
    """docs/billing.md, "unit hour": per run and size, the seconds at that size are rounded up to the increment
    (1 s) and then multiplied by the units. A lease of 8 GPUs from 09:00:00.4, grown to 16 at 10:00:00.7, ended
    at 12:00: 3,600.3 s → 3,601 s × 8 and 7,199.3 s → 7,200 s × 16 = 144,008 GPU-seconds at $3.60 per GPU-hour,
    $144.01 (the exact 143,991.2 GPU-seconds would be $143.99)."""
    org, project = make_org("acme")
    per_gpu = sku_for("gpu", model="H100")
    book(utc(2026, 1, 1), {(per_gpu, "standard", "reserved"): "3.60"})
    start, grow = utc(2026, 9, 1, 9, 0, 0, 400000), utc(2026, 9, 1, 10, 0, 0, 700000)
    common = {"sku": per_gpu, "model": "reserved", "resource_type": "lease", "run_key": "lease:l1"}
    fleet.run(org, project, "l1", start, grow, units=Decimal(8), key="lease:l1", **common)
    fleet.run(org, project, "l1", grow, utc(2026, 9, 1, 12), units=Decimal(16), key="lease:l1:grow", **common)
    collect(utc(2026, 9, 1), utc(2026, 9, 2))
    invoice_run_execute(period="2026-09")
    line = _invoice(org, "2026-09").lines.get()
    assert (line.billed_seconds, line.amount) == (Decimal(3601 * 8 + 7200 * 16), Decimal("144.01"))
