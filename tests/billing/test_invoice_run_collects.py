"""An invoice run records the period's usage itself: staff need not wait for the hourly recorder."""
import pytest

from apps.billing.models import Invoice, UsageRecord
from apps.billing.services import invoice_run_execute

from .conftest import H100, book, make_org, utc


@pytest.mark.django_db
def test_invoice_run_for_a_past_period_collects_usage_first(tiers, fleet):
    book(utc(2026, 1, 1), {(H100, "standard", "on_demand"): "2.00"})
    org, project = make_org("collect-org")
    fleet.run(org, project, "i-1", utc(2026, 10, 3, 10), utc(2026, 10, 3, 13))
    assert not UsageRecord.objects.filter(organization=org).exists()

    invoice_run_execute(period="2026-10")

    assert UsageRecord.objects.filter(organization=org).count() == 3  # three hourly pieces
    invoice = Invoice.objects.get(organization=org, period="2026-10")
    assert invoice.status == "finalized"
    assert str(invoice.total) == "6.00"
    invoice_run_execute(period="2026-10")  # idempotent: nothing recorded twice
    assert UsageRecord.objects.filter(organization=org).count() == 3
