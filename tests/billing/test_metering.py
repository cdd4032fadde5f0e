"""Metering: idempotent recording, clipping to metering hours, open intervals, registry, SKU keys."""
from decimal import Decimal

import pytest

from apps.billing.models import UsageRecord
from apps.billing.services import usage_record_collect
from apps.billing.skus import sku_for, sku_normalize
from apps.core.errors import ValidationFailed

from .conftest import collect, make_org, utc

pytestmark = pytest.mark.django_db


def test_recording_twice_or_with_overlapping_windows_counts_once(tiers, fleet):
    org, project = make_org("acme")
    fleet.run(org, project, "vm1", utc(2026, 3, 1, 10, 15), utc(2026, 3, 1, 13, 45))
    assert collect(utc(2026, 3, 1, 10), utc(2026, 3, 1, 12)) == {"test.fleet": 2}
    assert collect(utc(2026, 3, 1, 10), utc(2026, 3, 1, 12)) == {"test.fleet": 0}
    assert collect(utc(2026, 3, 1, 0), utc(2026, 3, 2, 0)) == {"test.fleet": 2}  # only 12:00-13:45 is new
    pieces = list(UsageRecord.objects.order_by("start").values_list("start", "end"))
    assert pieces == [(utc(2026, 3, 1, 10, 15), utc(2026, 3, 1, 11)), (utc(2026, 3, 1, 11), utc(2026, 3, 1, 12)),
                      (utc(2026, 3, 1, 12), utc(2026, 3, 1, 13)), (utc(2026, 3, 1, 13), utc(2026, 3, 1, 13, 45))]
    assert len({r.run_id for r in UsageRecord.objects.all()}) == 1
    assert {r.sla_tier for r in UsageRecord.objects.all()} == {"standard"}  # the organization's default tier


def test_open_interval_is_recorded_up_to_the_window_end(tiers, fleet):
    org, project = make_org("acme", tier="premium")
    fleet.run(org, project, "vm1", utc(2026, 3, 1, 10), None)
    collect(utc(2026, 3, 1, 10), utc(2026, 3, 1, 12))
    collect(utc(2026, 3, 1, 11), utc(2026, 3, 1, 13))
    assert UsageRecord.objects.count() == 3
    assert sum(r.seconds for r in UsageRecord.objects.all()) == 3 * 3600
    assert UsageRecord.objects.first().sla_tier == "premium"


def test_unaligned_window_and_unknown_source_refused(tiers, fleet):
    with pytest.raises(ValidationFailed) as exc:
        collect(utc(2026, 3, 1, 10, 30), utc(2026, 3, 1, 11))
    assert exc.value.code == "window_not_aligned"
    with pytest.raises(ValidationFailed) as exc:
        usage_record_collect(window_start=utc(2026, 3, 1), window_end=utc(2026, 3, 2), sources=["compute.nope"])
    assert exc.value.code == "unknown_usage_source"
    assert not UsageRecord.objects.exists()


def test_interval_with_foreign_project_refused(tiers, fleet):
    org, _ = make_org("acme")
    _, other_project = make_org("other")
    fleet.run(org, other_project, "vm1", utc(2026, 3, 1, 10), utc(2026, 3, 1, 11))
    with pytest.raises(ValidationFailed):
        collect(utc(2026, 3, 1, 10), utc(2026, 3, 1, 11))
    assert not UsageRecord.objects.exists()


def test_sku_keys_are_canonical():
    assert sku_for("gpu", model="H100", gpu_count=8) == "gpu:gpu_count=8,model=H100"
    assert sku_for("gpu", gpu_count="8", model="H100") == sku_for("gpu", gpu_count=Decimal("8.0"), model="H100") \
        == sku_for("gpu", gpu_count=8.0, model="H100") == sku_normalize("gpu:model=H100,gpu_count=08")
    assert sku_for("mig", model="H100-SXM5-80GB", profile="3g.40gb") == "mig:model=H100-SXM5-80GB,profile=3g.40gb"
    assert sku_for("public_ip") == "public_ip"
    for bad in ({"gpu_count": True}, {"model": "a b"}):
        with pytest.raises(ValidationFailed):
            sku_for("gpu", **bad)


def test_demo_price_book_loads_once(tiers):
    import io

    from apps.billing.demo import load_demo
    from apps.billing.models import Price

    out = io.StringIO()
    load_demo(out)
    load_demo(out)
    assert Price.objects.count() == 2 * (7 + 3 * 2 + 1 + 1)   # both tiers: the demo flavors' SKUs and bare metal's
    assert "present" in out.getvalue()
