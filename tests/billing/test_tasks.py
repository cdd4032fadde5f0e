"""Beat tasks: collection of closed metering periods (every period, at most hourly), invoice run for the month that ended."""
import importlib
import pickle
from decimal import Decimal

import pytest
import time_machine

from apps.billing.models import Invoice, UsageRecord
from apps.billing.services import invoice_preview
from apps.billing.tasks import invoice_preview_task, invoice_run_due_task, usage_record_collect_task

from .conftest import H100, book, make_org, utc

pytestmark = pytest.mark.django_db


def test_hourly_collect_then_monthly_run(tiers, fleet):
    org, project = make_org("tokyo", tz="Asia/Tokyo")
    book(utc(2026, 1, 1), {(H100, "standard", "on_demand"): "1.00"})
    fleet.run(org, project, "vm1", utc(2026, 4, 30, 10), None)  # still running
    with time_machine.travel(utc(2026, 4, 30, 16, 7), tick=False):
        assert usage_record_collect_task()["test.fleet"] == 6   # 10:00-16:00 (window: the last 24 h)
        assert usage_record_collect_task()["test.fleet"] == 0   # same hours again: nothing new
        assert invoice_preview_task()["drafted"] == 1             # April (UTC label) draft
    with time_machine.travel(utc(2026, 5, 1, 0, 20), tick=False):
        usage_record_collect_task()                                # up to 00:00Z
        result = invoice_run_due_task()                            # April in Tokyo ended at 04-30T15:00Z
    assert result["finalized"] == 1
    invoice = Invoice.objects.get(organization=org, period="2026-04")
    assert (invoice.status, invoice.total) == ("finalized", Decimal("5.00"))  # 10:00-15:00Z is April in Tokyo
    assert UsageRecord.objects.filter(source="test.fleet").count() == 14


@pytest.fixture
def beat_schedule(settings):
    """apps.billing.schedule rebuilt under the test's settings (its BEAT_SCHEDULE is built at import), and rebuilt
    under the defaults afterwards."""
    import apps.billing.schedule as module

    def build(**overrides):
        for name, value in overrides.items():
            setattr(settings, name, value)
        return importlib.reload(module).BEAT_SCHEDULE
    yield build
    settings.BILLING_METERING_PERIOD_SECONDS = 3600
    importlib.reload(module)


def test_usage_collection_runs_every_metering_period_shorter_than_an_hour(tiers, fleet, beat_schedule):
    """With BILLING_METERING_PERIOD_SECONDS=60 the collection is due 5 s after every minute (a twelfth of the period
    after its boundary), not once an hour, so the month-to-date preview moves every minute; a missed run runs once
    when beat is back. The default hour keeps hh:05. The schedule survives beat's shelve (pickle)."""
    org, project = make_org("acme")
    book(utc(2026, 1, 1), {(H100, "standard", "on_demand"): "3.60"})
    fleet.run(org, project, "vm1", utc(2026, 3, 2, 11, 58), None)  # still running
    collect = beat_schedule(BILLING_METERING_PERIOD_SECONDS=60)["billing-usage-collect"]["schedule"]
    assert pickle.loads(pickle.dumps(collect)) == collect
    last = utc(2026, 3, 2, 11, 59, 5)
    with time_machine.travel(utc(2026, 3, 2, 12, 0, 4), tick=False):
        state = collect.is_due(last)
        assert not state.is_due and state.next == pytest.approx(1)
    with time_machine.travel(utc(2026, 3, 2, 12, 0, 5), tick=False):
        assert collect.is_due(last).is_due
        assert usage_record_collect_task()["test.fleet"] == 2  # 11:58-11:59 and 11:59-12:00
        preview = invoice_preview(organization=org, serialize=lambda invoice: {"total": invoice.total})
        assert (preview["total"], preview["usage_until"]) == (Decimal("0.12"), utc(2026, 3, 2, 12))
        assert not collect.is_due(utc(2026, 3, 2, 12, 0, 5)).is_due
    with time_machine.travel(utc(2026, 3, 2, 12, 7, 30), tick=False):  # beat was down: one catch-up run
        assert collect.is_due(utc(2026, 3, 2, 12, 0, 5)).is_due
        assert collect.is_due(utc(2026, 3, 2, 12, 7, 30)).next == pytest.approx(35)

    hourly = beat_schedule(BILLING_METERING_PERIOD_SECONDS=3600)["billing-usage-collect"]["schedule"]
    with time_machine.travel(utc(2026, 3, 2, 13, 4, 59), tick=False):
        assert not hourly.is_due(utc(2026, 3, 2, 12, 5)).is_due
    with time_machine.travel(utc(2026, 3, 2, 13, 5), tick=False):
        assert hourly.is_due(utc(2026, 3, 2, 12, 5)).is_due
