"""Beat tasks: hourly collection of closed metering hours, invoice run for the month that ended."""
from decimal import Decimal

import pytest
import time_machine

from apps.billing.models import Invoice, UsageRecord
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
