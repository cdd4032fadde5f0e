"""Invoices: periods in the billing time zone (RW-055, RW-056, DST), proration (RW-053), tax and rounding
(RW-070), idempotent and resumable runs, gap-free numbers, immutability, late records."""
import datetime as dt
from decimal import Decimal

import pytest
import time_machine
from django.db import DatabaseError, transaction

from apps.billing import periods
from apps.billing.models import Invoice, InvoiceRun, NumberSequence, UsageRecord
from apps.billing.money import line_tax, round_money
from apps.billing.services import billing_account_update, invoice_run_execute, invoicing, sla
from apps.core.errors import ValidationFailed

from .conftest import H100, book, collect, make_org, utc

pytestmark = pytest.mark.django_db
LEASE = "lease:model=H100,unit=node"


def _reserved_book(price, unit="hour"):
    book(utc(2010, 1, 1), {(LEASE, "standard", "reserved"): {"unit_price": Decimal(price), "unit": unit,
                                                            "minimum_seconds": 0}})


def test_rw053_commitment_prorated_over_whole_term(tiers, fleet):
    """Quarterly $9,100 commitment (calendar quarter, 91 days) starting 2024-05-20: 42 days x $100 = $4,200."""
    org, project = make_org("acme")
    _reserved_book("0")
    fleet.run(org, project, "lease1", utc(2024, 5, 20), utc(2024, 7, 1), sku=LEASE, model="reserved",
              resource_type="lease", commitment_amount=Decimal("9100"), commitment_start=utc(2024, 4, 1),
              commitment_end=utc(2024, 7, 1))
    collect(utc(2024, 5, 1), utc(2024, 7, 1))
    invoice_run_execute(period="2024-05")
    invoice_run_execute(period="2024-06")
    totals = dict(Invoice.objects.filter(organization=org).values_list("period", "total"))
    assert totals == {"2024-05": Decimal("1200.00"), "2024-06": Decimal("3000.00")}
    assert sum(totals.values()) == Decimal("4200.00")


def test_rw055_month_end_start_no_period_skipped(tiers, fleet):
    """A monthly reservation from 2017-01-31 for six months, priced per month and prorated over the whole
    calendar month: every month Jan..Jul is invoiced, periods abut, and the total is exactly six months."""
    org, project = make_org("acme")
    _reserved_book("3100", unit="month")
    fleet.run(org, project, "lease1", utc(2017, 1, 31), utc(2017, 7, 31), sku=LEASE, model="reserved",
              resource_type="lease")
    collect(utc(2017, 1, 31), utc(2017, 7, 31))
    labels = ["2017-01", "2017-02", "2017-03", "2017-04", "2017-05", "2017-06", "2017-07"]
    for label in labels:
        invoice_run_execute(period=label)
    invoices = list(Invoice.objects.filter(organization=org).order_by("period_start"))
    assert [i.period for i in invoices] == labels
    assert all(a.period_end == b.period_start for a, b in zip(invoices, invoices[1:], strict=False))
    assert [i.total for i in invoices] == [Decimal("100.00")] + [Decimal("3100.00")] * 5 + [Decimal("3000.00")]
    assert sum(i.total for i in invoices) == 6 * Decimal("3100.00")
    assert sum(i.lines.get().billed_seconds for i in invoices) == Decimal(
        (utc(2017, 7, 31) - utc(2017, 1, 31)).total_seconds())
    assert periods.period_bounds("2024-02") == (utc(2024, 2, 1), utc(2024, 3, 1))  # leap year: Feb ends 02-29
    assert periods.period_bounds("2017-02")[1] - periods.period_bounds("2017-02")[0] == dt.timedelta(days=28)


def test_rw056_tokyo_customer_one_invoice_usage_in_local_month(tiers, fleet):
    org, project = make_org("tokyo", tz="Asia/Tokyo")
    book(utc(2024, 1, 1), {(H100, "standard", "on_demand"): "1.00"})
    fleet.run(org, project, "vm1", utc(2024, 2, 10), utc(2024, 2, 10, 5))           # February, 5 h
    fleet.run(org, project, "vm1", utc(2024, 2, 29, 16), utc(2024, 2, 29, 18))      # 03-01 01:00 JST, 2 h
    collect(utc(2024, 2, 1), utc(2024, 3, 2))
    # the billing job wakes at 2024-02-29T15:30Z and again at 2024-03-01T00:30Z: both are March 1st in Tokyo,
    # so both invoice Tokyo's February
    for wake in (utc(2024, 2, 29, 15, 30), utc(2024, 3, 1, 0, 30)):
        assert periods.previous_period(periods.period_of(wake, "Asia/Tokyo")) == "2024-02"
        invoice_run_execute(period="2024-02")
    feb = Invoice.objects.get(organization=org, period="2024-02")
    assert (feb.period_start, feb.period_end) == (utc(2024, 1, 31, 15), utc(2024, 2, 29, 15))
    assert feb.total == Decimal("5.00")
    invoice_run_execute(period="2024-03")
    assert Invoice.objects.get(organization=org, period="2024-03").total == Decimal("2.00")
    assert Invoice.objects.filter(organization=org).count() == 2


@pytest.mark.parametrize(("label", "hours"), [("2026-03", 743), ("2026-10", 745), ("2026-06", 720)])
def test_dst_change_inside_the_month(tiers, fleet, label, hours):
    """Europe/Berlin: March 2026 loses an hour (743 h), October gains one (745 h); hourly usage over the whole
    local month and a monthly price both follow the real length."""
    org, project = make_org("berlin", tz="Europe/Berlin")
    book(utc(2020, 1, 1), {(H100, "standard", "on_demand"): "2.00",
                           (LEASE, "standard", "reserved"): {"unit_price": Decimal("1000"), "unit": "month",
                                                             "minimum_seconds": 0}})
    start, end = periods.period_bounds(label, "Europe/Berlin")
    fleet.run(org, project, "vm1", start, end)
    fleet.run(org, project, "lease1", start, end, sku=LEASE, model="reserved", resource_type="lease")
    collect(start, end)
    invoice_run_execute(period=label)
    invoice = Invoice.objects.get(organization=org)
    assert invoice.period_end - invoice.period_start == dt.timedelta(hours=hours)
    amounts = dict(invoice.lines.values_list("resource_id", "amount"))
    assert amounts == {"vm1": Decimal(hours * 2).quantize(Decimal("0.01")), "lease1": Decimal("1000.00")}


def test_rw070_tax_rounding_rules():
    assert line_tax(Decimal("8180.00"), Decimal("0.09975"), "USD") == Decimal("815.96")              # (a)
    assert round_money(Decimal("2084.5622"), "USD") + round_money(Decimal("805.18409"), "USD") == Decimal("2889.74")
    assert Decimal("1000.00") + line_tax(Decimal("1000.00"), Decimal("0.19"), "EUR") == Decimal("1190.00")  # (c)
    assert round_money(Decimal("0.5"), "JPY") == Decimal("1") and round_money(Decimal("-0.005"), "USD") == Decimal(
        "-0.01")


def test_rw070_invoice_total_is_sum_of_printed_lines(tiers, fleet):
    org, project = make_org("acme", currency="EUR")
    billing_account_update(actor=None, organization=org, tax_rate=Decimal("0.19"))
    sku_a, sku_b = "gpu:model=A", "gpu:model=B"
    # per-hour prices so that each line's tax has sub-cent parts
    book(utc(2026, 1, 1), {(sku_a, "standard", "on_demand"): "1097.138", (sku_b, "standard", "on_demand"): "423.7811"},
         currency="EUR")
    fleet.run(org, project, "a", utc(2026, 4, 1), utc(2026, 4, 1, 10), sku=sku_a)
    fleet.run(org, project, "b", utc(2026, 4, 1), utc(2026, 4, 1, 10), sku=sku_b)
    collect(utc(2026, 4, 1), utc(2026, 4, 2))
    invoice_run_execute(period="2026-04")
    invoice = Invoice.objects.get(organization=org)
    lines = list(invoice.lines.order_by("sku"))
    assert [(line.amount, line.tax_amount) for line in lines] == [
        (Decimal("10971.38"), Decimal("2084.56")), (Decimal("4237.81"), Decimal("805.18"))]
    assert invoice.tax == Decimal("2889.74") == sum(line.tax_amount for line in lines)
    assert invoice.total == sum(line.amount + line.tax_amount for line in lines) == Decimal("18098.93")
    assert invoice.currency == "EUR"


def _three_orgs(fleet, n=5):
    book(utc(2026, 1, 1), {(H100, "standard", "on_demand"): "1.50"})
    orgs = []
    for i in range(n):
        org, project = make_org(f"org{i}")
        fleet.run(org, project, f"vm{i}", utc(2026, 2, 1), utc(2026, 2, 1, i + 1))
        orgs.append(org)
    collect(utc(2026, 2, 1), utc(2026, 2, 2))
    return orgs


def _snapshot():
    return sorted(Invoice.objects.filter(period="2026-02").values_list("organization_id", "id", "number", "total",
                                                                       "status"))


def test_invoice_run_twice_gives_same_invoices(tiers, fleet):
    _three_orgs(fleet)
    first_number = NumberSequence.objects.get(name="invoice").next_value
    invoice_run_execute(period="2026-02")
    before = _snapshot()
    invoice_run_execute(period="2026-02")
    assert _snapshot() == before
    assert [row[2] for row in before] == list(range(first_number, first_number + 5))  # gap-free, org-id order
    assert [row[3] for row in before] == [Decimal("1.50") * (i + 1) for i in range(5)]
    assert NumberSequence.objects.get(name="invoice").next_value == first_number + 5


def test_invoice_run_killed_between_batches_then_rerun(tiers, fleet, settings, monkeypatch):
    settings.BILLING_RUN_BATCH_SIZE = 2
    _three_orgs(fleet)
    first_number = NumberSequence.objects.get(name="invoice").next_value

    def crash(run, batch):
        raise RuntimeError("worker killed")
    monkeypatch.setattr(invoicing, "after_batch_hook", crash)
    with pytest.raises(RuntimeError):
        invoice_run_execute(period="2026-02")
    assert InvoiceRun.objects.get().status == "failed"
    assert Invoice.objects.filter(period="2026-02", status="finalized").count() == 2
    monkeypatch.setattr(invoicing, "after_batch_hook", None)
    invoice_run_execute(period="2026-02")
    rows = _snapshot()
    assert [row[2] for row in rows] == list(range(first_number, first_number + 5))
    assert [row[3] for row in rows] == [Decimal("1.50") * (i + 1) for i in range(5)]
    assert Invoice.objects.count() == 5


def test_invoice_run_crash_inside_a_batch_rolls_the_batch_back(tiers, fleet, settings, monkeypatch):
    settings.BILLING_RUN_BATCH_SIZE = 2
    _three_orgs(fleet)
    first_number = NumberSequence.objects.get(name="invoice").next_value
    real = sla.sla_credit_lines_add
    calls = {"n": 0}

    def flaky():
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("killed mid-batch")
        real()
    monkeypatch.setattr(sla, "sla_credit_lines_add", flaky)
    with pytest.raises(RuntimeError):
        invoice_run_execute(period="2026-02")
    assert Invoice.objects.count() == 2  # the second batch left nothing behind
    monkeypatch.setattr(sla, "sla_credit_lines_add", real)
    invoice_run_execute(period="2026-02")
    assert [row[2] for row in _snapshot()] == list(range(first_number, first_number + 5))


def test_open_month_not_finalized_and_late_records_rerated(tiers, fleet):
    orgs = _three_orgs(fleet, n=1)
    invoice_run_execute(period="2026-02", finalize=False)
    invoice = Invoice.objects.get()
    assert (invoice.status, invoice.total) == ("draft", Decimal("1.50"))
    fleet.run(orgs[0], orgs[0].projects.get(), "late", utc(2026, 2, 3), utc(2026, 2, 3, 2))
    collect(utc(2026, 2, 3), utc(2026, 2, 4))  # a late record for the still-open period
    invoice_run_execute(period="2026-02")
    invoice.refresh_from_db()
    assert (invoice.status, invoice.total) == ("finalized", Decimal("4.50"))


def test_finalizing_a_draft_by_hand_rerates_it_from_all_usage_of_its_period(tiers, fleet):
    """A draft computed on 29 April, usage recorded for 30 April afterwards, finalized by hand on 2 May: the
    finalized total includes the 30th (it is not the total of the 29th's run)."""
    from apps.billing.services import invoice_finalize

    org, project = make_org("acme")
    book(utc(2026, 1, 1), {(H100, "standard", "on_demand"): "1.50"})
    fleet.run(org, project, "vm1", utc(2026, 4, 28), utc(2026, 4, 28, 2))
    with time_machine.travel(utc(2026, 4, 29, 12), tick=False):
        collect(utc(2026, 4, 28), utc(2026, 4, 29))
        invoice_run_execute(period="2026-04", finalize=False)
    invoice = Invoice.objects.get()
    assert (invoice.status, invoice.total) == ("draft", Decimal("3.00"))
    fleet.run(org, project, "vm2", utc(2026, 4, 30), utc(2026, 4, 30, 4))
    with time_machine.travel(utc(2026, 5, 2), tick=False):
        collect(utc(2026, 4, 30), utc(2026, 5, 1))
        invoice = invoice_finalize(actor=None, invoice=invoice)
    invoice.refresh_from_db()
    assert (invoice.status, invoice.total) == ("finalized", Decimal("9.00"))
    assert invoice.lines.filter(kind="usage").count() == 2


def test_unpriced_usage_holds_the_invoice_in_draft(tiers, fleet):
    org, project = make_org("acme")
    book(utc(2026, 2, 15), {(H100, "standard", "on_demand"): "1.00"})  # nothing before Feb 15
    fleet.run(org, project, "vm1", utc(2026, 2, 14, 23), utc(2026, 2, 15, 1))
    collect(utc(2026, 2, 14), utc(2026, 2, 16))
    run = invoice_run_execute(period="2026-02")
    invoice = Invoice.objects.get()
    assert (invoice.status, invoice.unpriced_seconds, invoice.total) == ("draft", Decimal(3600), Decimal("1.00"))
    assert run.held_invoices == [str(invoice.id)]


def test_a_refused_hand_finalize_leaves_no_running_invoice_run(tiers, fleet):
    """Finalizing a draft by hand re-rates it as an invoice run of its organization; when the finalize is refused
    (409 `unpriced_usage`), that re-rating is rolled back with it and no run is left `running` forever; the
    draft stays as it was, and the invoice run that follows is the only one recorded."""
    from apps.billing.services import invoice_finalize
    from apps.core.errors import Conflict

    org, project = make_org("acme")
    book(utc(2026, 2, 15), {(H100, "standard", "on_demand"): "1.00"})  # nothing before Feb 15
    fleet.run(org, project, "vm1", utc(2026, 2, 14, 23), utc(2026, 2, 15, 1))
    collect(utc(2026, 2, 14), utc(2026, 2, 16))
    invoice_run_execute(period="2026-02")
    invoice = Invoice.objects.get()
    with pytest.raises(Conflict) as refused:
        invoice_finalize(actor=None, invoice=invoice)
    assert refused.value.code == "unpriced_usage"
    assert list(InvoiceRun.objects.values_list("status", flat=True)) == ["completed"]
    invoice.refresh_from_db()
    assert (invoice.status, invoice.number, invoice.total) == ("draft", None, Decimal("1.00"))


def test_a_finalized_invoice_never_locks_the_books_of_another_customer(tiers, fleet):
    """acme's February invoice is finalized while beta's is held (no price for its SKU): the provider adds the
    missing price to the February book, and even a new book starting inside February; beta's rerun finalizes at
    that price, acme's invoice stays as billed."""
    from apps.billing.services import price_book_create, price_set

    feb = book(utc(2026, 2, 1), {(H100, "standard", "on_demand"): "1.00"})
    acme, acme_p = make_org("acme")
    beta, beta_p = make_org("beta")
    other = "gpu:gpu_count=1,model=A100-SXM4-80GB"
    fleet.run(acme, acme_p, "vm-a", utc(2026, 2, 3), utc(2026, 2, 3, 2))
    fleet.run(beta, beta_p, "vm-b", utc(2026, 2, 3), utc(2026, 2, 3, 3), sku=other)
    collect(utc(2026, 2, 3), utc(2026, 2, 4))
    invoice_run_execute(period="2026-02")
    assert dict(Invoice.objects.values_list("organization__slug", "status")) == {"acme": "finalized",
                                                                                 "beta": "draft"}
    price_set(actor=None, book=feb, sku=other, sla_tier="standard", pricing_model="on_demand",
              unit_price=Decimal("2.00"))
    price_book_create(actor=None, name="mid-February", currency="USD", effective_from=utc(2026, 2, 20))
    invoice_run_execute(period="2026-02")
    rows = dict((slug, (status, total)) for slug, status, total in
                Invoice.objects.values_list("organization__slug", "status", "total"))
    assert rows == {"acme": ("finalized", Decimal("2.00")), "beta": ("finalized", Decimal("6.00"))}


def test_finalized_invoice_and_usage_records_are_immutable(tiers, fleet):
    _three_orgs(fleet, n=1)
    invoice_run_execute(period="2026-02")
    invoice = Invoice.objects.get()
    with pytest.raises(DatabaseError), transaction.atomic():
        Invoice.objects.filter(pk=invoice.pk).update(total=Decimal("0"))
    with pytest.raises(DatabaseError), transaction.atomic():
        UsageRecord.objects.update(end=utc(2026, 2, 1, 0, 30))
    with pytest.raises(DatabaseError), transaction.atomic():
        UsageRecord.objects.all().delete()


def test_bad_period_is_refused():
    with pytest.raises(ValidationFailed):
        invoice_run_execute(period="2026-13")


def test_late_record_after_finalization_is_carried_once_to_the_next_invoice(tiers, fleet):
    org, project = make_org("acme")
    book(utc(2026, 1, 1), {(H100, "standard", "on_demand"): "1.50"})
    fleet.run(org, project, "vm1", utc(2026, 2, 1), utc(2026, 2, 1, 2))
    collect(utc(2026, 2, 1), utc(2026, 2, 2))
    invoice_run_execute(period="2026-02")
    fleet.run(org, project, "vm1", utc(2026, 2, 20), utc(2026, 2, 20, 3), key="late")  # arrives after finalization
    fleet.run(org, project, "vm1", utc(2026, 3, 2), utc(2026, 3, 2, 1))
    collect(utc(2026, 2, 20), utc(2026, 2, 21))
    collect(utc(2026, 3, 2), utc(2026, 3, 3))
    invoice_run_execute(period="2026-02")  # February is closed: unchanged
    assert Invoice.objects.get(period="2026-02").total == Decimal("3.00")
    invoice_run_execute(period="2026-03", finalize=False)
    invoice_run_execute(period="2026-03")
    march = Invoice.objects.get(period="2026-03")
    lines = sorted((line.description.startswith("Late usage of 2026-02: Instance "), line.amount) for line in march.lines.all())
    assert lines == [(False, Decimal("1.50")), (True, Decimal("4.50"))]
    invoice_run_execute(period="2026-04")  # carried once, not again
    assert not Invoice.objects.filter(period="2026-04").exists()
    assert sum(Invoice.objects.values_list("total", flat=True)) == Decimal("1.50") * 6  # all 6 hours, once each
