"""SLA: downtime not charged, uptime per resource, credits on the next invoice (RW-050)."""
import datetime as dt
from decimal import Decimal

import pytest
import time_machine

from apps.billing.models import Invoice, SlaReport, SlaTier
from apps.billing.services import adjustment_create, invoice_preview, invoice_run_execute, sla_tier_create
from apps.billing.services.sla import credit_pct_for, uptime_pct
from apps.tenancy.models import Organization

from .conftest import H100, book, collect, incident, make_org, utc

pytestmark = pytest.mark.django_db


def test_default_tiers_are_data(tiers):
    assert {t.code: (t.target_uptime_pct, t.credit_schedule) for t in SlaTier.objects.all()} == {
        "standard": (Decimal("99.0000"), [{"below": "99.0", "credit_pct": "10"}, {"below": "95.0", "credit_pct": "30"},
                                          {"below": "90.0", "credit_pct": "100"}]),
        "premium": (Decimal("99.9000"), [{"below": "99.9", "credit_pct": "10"}, {"below": "99.0", "credit_pct": "25"},
                                         {"below": "95.0", "credit_pct": "100"}]),
    }


def test_acceptance_premium_full_month_9h_host_fault(tiers, fleet, host):
    """A premium instance runs all of June 2026 (30 days); its host is down 9 h by a provider fault: uptime 98.75 %,
    the 9 h are not charged, and 25 % of the billed amount is credited on the July invoice."""
    org, project = make_org("acme", tier="premium")
    book(utc(2026, 1, 1), {(H100, "premium", "on_demand"): "4.00"})
    h = host("gpu-node-1")
    fleet.run(org, project, "vm1", utc(2026, 6, 1), utc(2026, 7, 1))
    fleet.place(h.id, "vm1", utc(2026, 5, 31))
    incident(h, utc(2026, 6, 10, 3), utc(2026, 6, 10, 12))  # 9 h
    collect(utc(2026, 6, 1), utc(2026, 7, 1))
    invoice_run_execute(period="2026-06")
    june = Invoice.objects.get(organization=org, period="2026-06")
    line = june.lines.get()
    assert (line.billed_seconds, line.amount) == (Decimal(711 * 3600), Decimal("2844.00"))  # 711 h x $4
    report = SlaReport.objects.get(resource_id="vm1", period="2026-06")
    assert (report.uptime_pct, report.credit_pct, report.billed_amount, report.credit_amount) == (
        Decimal("98.75"), Decimal("25"), Decimal("2844.00"), Decimal("711.00"))
    assert june.credits == Decimal("0.00") and june.status == "finalized"

    invoice_run_execute(period="2026-07")  # no usage in July: the pending credit alone brings the invoice
    july = Invoice.objects.get(organization=org, period="2026-07")
    credit = july.lines.get(kind="sla_credit")
    assert (credit.amount, july.credits, july.total) == (Decimal("-711.00"), Decimal("-711.00"), Decimal("-711.00"))
    assert credit.description == "SLA credit for 2026-06: Instance vm1, uptime 98.75 % (credit 25 %)"
    assert line.description == "Instance vm1 (1 × H100-SXM5-80GB GPU), on demand"
    report.refresh_from_db()
    assert report.applied_invoice_id == july.id
    invoice_run_execute(period="2026-08")  # applied once, never again
    assert not Invoice.objects.filter(organization=org, period="2026-08").exists()


def test_downtime_not_at_fault_is_charged(tiers, fleet, host):
    org, project = make_org("acme", tier="premium")
    book(utc(2026, 1, 1), {(H100, "premium", "on_demand"): "4.00"})
    h = host("n1")
    fleet.run(org, project, "vm1", utc(2026, 6, 1), utc(2026, 6, 2))
    fleet.place(h.id, "vm1", utc(2026, 6, 1))
    incident(h, utc(2026, 6, 1, 3), utc(2026, 6, 1, 12), at_fault=False)
    collect(utc(2026, 6, 1), utc(2026, 6, 2))
    invoice_run_execute(period="2026-06")
    assert Invoice.objects.get(organization=org).total == Decimal("96.00")
    assert not SlaReport.objects.exists()


def test_gpu_incident_affects_only_resources_on_that_gpu(tiers, fleet, host):
    from apps.inventory.models import Gpu

    org, project = make_org("acme")
    book(utc(2026, 1, 1), {(H100, "standard", "on_demand"): "1.00"})
    h = host("n1")
    gpu_fields = {f.name for f in Gpu._meta.concrete_fields}
    kwargs = {"host": h, "index": 0}
    for name, value in (("model", "H100-SXM5-80GB"), ("uuid", "GPU-0"), ("pci_address", "0000:17:00.0")):
        if name in gpu_fields:
            kwargs[name] = value
    gpu = Gpu.objects.create(**kwargs)
    for vm, g in (("vm-a", gpu.id), ("vm-b", "other")):
        fleet.run(org, project, vm, utc(2026, 6, 1), utc(2026, 6, 2))
        fleet.place(h.id, vm, utc(2026, 6, 1), gpu_id=g)
    incident(h, utc(2026, 6, 1, 0), utc(2026, 6, 1, 4), gpu=gpu)
    collect(utc(2026, 6, 1), utc(2026, 6, 2))
    invoice_run_execute(period="2026-06")
    amounts = dict(Invoice.objects.get(organization=org).lines.values_list("resource_id", "amount"))
    assert amounts == {"vm-a": Decimal("20.00"), "vm-b": Decimal("24.00")}


AWS = [{"below": "99.99", "credit_pct": "10"}, {"below": "99.0", "credit_pct": "30"},
       {"below": "95.0", "credit_pct": "100"}]


@pytest.mark.parametrize(("down_min", "uptime", "pct"), [
    (4, "99.99074074", "0"), (5, "99.98842593", "10"), (432, "99.00000000", "10"),
    (433, "98.99768519", "30"), (2160, "95.00000000", "30"), (2161, "94.99768519", "100")])
def test_rw050_boundaries_unit(down_min, uptime, pct):
    value = uptime_pct(Decimal(43200), Decimal(down_min))
    assert value.quantize(Decimal("1e-8")) == Decimal(uptime)
    assert credit_pct_for(AWS, value) == Decimal(pct)
    assert (Decimal("10000") * credit_pct_for(AWS, value) / 100).quantize(Decimal("0.01")) == \
        Decimal("10000") * Decimal(pct) / 100  # e.g. 30 % of the $10,000 recurring bill = $3,000


def test_rw050_boundaries_end_to_end_with_upfront_fee_excluded(tiers, fleet, host):
    """Six resources in one 30-day month (43,200 min) down 4, 5, 432, 433, 2160, 2161 min; an AWS-like tier;
    a $50,000 one-time upfront fee on the same invoice is not part of any credit base."""
    sla_tier_create(actor=None, code="aws", name="AWS-like", target_uptime_pct=Decimal("99.99"), credit_schedule=AWS,
                    support_response_minutes=60)
    org, project = make_org("acme", tier="aws")
    sku = "node:model=H100"
    book(utc(2026, 1, 1), {(sku, "aws", "on_demand"): {"unit_price": Decimal("10000"), "unit": "month",
                                                       "minimum_seconds": 0}})
    expected = {4: "0", 5: "10", 432: "10", 433: "30", 2160: "30", 2161: "100"}
    for minutes in expected:
        h = host(f"n{minutes}")
        fleet.run(org, project, f"vm{minutes}", utc(2026, 6, 1), utc(2026, 7, 1), sku=sku)
        fleet.place(h.id, f"vm{minutes}", utc(2026, 6, 1))
        incident(h, utc(2026, 6, 15), utc(2026, 6, 15) + dt.timedelta(minutes=minutes))
    adjustment_create(actor=None, organization=org, period="2026-06", amount=Decimal("50000"),
                      description="Upfront reservation fee", recurring=False)
    collect(utc(2026, 6, 1), utc(2026, 7, 1))
    invoice_run_execute(period="2026-06")
    for minutes, pct in expected.items():
        report = SlaReport.objects.get(resource_id=f"vm{minutes}")
        billed = (Decimal(10000) * (43200 - minutes) / 43200).quantize(Decimal("0.01"))
        assert (report.credit_pct, report.billed_amount) == (Decimal(pct), billed)
        assert report.credit_amount == (billed * Decimal(pct) / 100).quantize(Decimal("0.01"))
    assert Organization.objects.get(pk=org.pk).invoices.get().subtotal == Decimal("50000") + sum(
        (Decimal(10000) * (43200 - m) / 43200).quantize(Decimal("0.01")) for m in expected)


def test_a_credit_drafted_onto_a_month_ahead_moves_to_the_next_invoice(tiers, fleet, host):
    """December's SLA credit belongs on January's invoice, once. A draft of a month far ahead does not take it (the
    months before it are to be invoiced first, ADR 0607); one that holds it (drafted before that rule) gives it up
    when January is rated: January is found by that credit alone (no January usage), carries it, and the later draft's line and totals drop; rating the later draft again does
    not take it back."""
    org, project = make_org("acme", tier="premium")
    book(utc(2026, 1, 1), {(H100, "premium", "on_demand"): "4.00"})
    h = host("gpu-node-1")
    fleet.run(org, project, "vm1", utc(2026, 12, 1), utc(2027, 1, 1))
    fleet.place(h.id, "vm1", utc(2026, 11, 30))
    incident(h, utc(2026, 12, 10, 3), utc(2026, 12, 10, 12))  # 9 h of 744 h: uptime 98.79 %, 25 %
    with time_machine.travel(utc(2027, 1, 1, 1), tick=False):
        collect(utc(2026, 12, 1), utc(2027, 1, 1))
        invoice_run_execute(period="2026-12")
    report = SlaReport.objects.get(resource_id="vm1", period="2026-12")
    assert report.credit_amount == Decimal("735.00")  # 25 % of 735 h x $4
    with time_machine.travel(utc(2099, 12, 2), tick=False):
        invoice_run_execute(period="2099-12", finalize=False)
    ahead = Invoice.objects.get(organization=org, period="2099-12")
    assert ahead.credits == Decimal("0.00")  # January (and every month up to November 2099) is to be invoiced first
    report.refresh_from_db()
    ahead.lines.create(kind="sla_credit", description="held", quantity=1, unit="each", unit_price=Decimal("-735.00"),
                       raw_amount=Decimal("-735.00"), amount=Decimal("-735.00"), tax_amount=0, sla_report=report)
    SlaReport.objects.filter(pk=report.pk).update(applied_invoice=ahead)  # as a draft drafted before ADR 0607 held it
    Invoice.objects.filter(pk=ahead.pk).update(credits=Decimal("-735.00"), total=Decimal("-735.00"))

    with time_machine.travel(utc(2027, 1, 15), tick=False):
        invoice_run_execute(period="2027-01", finalize=False)
        invoice_run_execute(period="2027-01", finalize=False)  # a rerun keeps it there
    january = Invoice.objects.get(organization=org, period="2027-01")
    assert (january.credits, january.total) == (Decimal("-735.00"), Decimal("-735.00"))
    assert january.lines.get(kind="sla_credit").description.startswith("SLA credit for 2026-12: Instance vm1")
    ahead.refresh_from_db()
    assert (ahead.credits, ahead.total, ahead.lines.filter(kind="sla_credit").count()) == (
        Decimal("0.00"), Decimal("0.00"), 0)
    report.refresh_from_db()
    assert report.applied_invoice_id == january.id
    with time_machine.travel(utc(2099, 12, 3), tick=False):
        invoice_run_execute(period="2099-12", finalize=False)
    report.refresh_from_db()
    assert report.applied_invoice_id == january.id
    assert Invoice.objects.get(pk=ahead.pk).credits == Decimal("0.00")


def _december_credit(tiers, fleet, host):
    """December 2026's SLA credit of $735.00, finalized on January 1st; the instance ran December only."""
    org, project = make_org("acme", tier="premium")
    book(utc(2026, 1, 1), {(H100, "premium", "on_demand"): "4.00"})
    h = host("gpu-node-1")
    fleet.run(org, project, "vm1", utc(2026, 12, 1), utc(2027, 1, 1))
    fleet.place(h.id, "vm1", utc(2026, 11, 30))
    incident(h, utc(2026, 12, 10, 3), utc(2026, 12, 10, 12))
    with time_machine.travel(utc(2027, 1, 1, 1), tick=False):
        collect(utc(2026, 12, 1), utc(2027, 1, 1))
        invoice_run_execute(period="2026-12")
    return org, SlaReport.objects.get(resource_id="vm1", period="2026-12")


def _preview(org) -> dict:
    return invoice_preview(organization=org, serialize=lambda i: {
        "period": i.period, "credits": i.credits, "total": i.total,
        "credit_lines": i.lines.filter(kind="sla_credit").count()})


def test_a_pending_credit_waits_for_last_month_s_invoice_not_the_month_to_date(tiers, fleet, host):
    """The demo tenant's case (ADR 0607): December's credit is pending ("on the next invoice") while January, the
    month before the one in progress, is not invoiced yet. February's month to date (and a refresh of February's
    draft) does not subtract it: January's closing run drafts January for the credit and carries it. A February
    draft that held it before the rule gives it back to pending."""
    org, report = _december_credit(tiers, fleet, host)
    with time_machine.travel(utc(2027, 2, 10), tick=False):
        adjustment_create(actor=None, organization=org, period="2027-02", amount=Decimal("100.00"),
                          description="support plan")  # February's spend so far
        assert _preview(org) == {"period": "2027-02", "credits": Decimal("0.00"), "total": Decimal("100.00"),
                                 "credit_lines": 0, "usage_until": None}  # before: credits -735.00, total -635.00
        invoice_run_execute(period="2027-02", finalize=False)
        february = Invoice.objects.get(organization=org, period="2027-02")
        SlaReport.objects.filter(pk=report.pk).update(applied_invoice=february)  # held before the rule
        invoice_run_execute(period="2027-02", finalize=False)
        report.refresh_from_db()
        february.refresh_from_db()
        assert (report.applied_invoice_id, february.credits, february.total) == (None, Decimal("0.00"),
                                                                                 Decimal("100.00"))

        invoice_run_execute(period="2027-01")  # last month's closing run: the credit alone brings the invoice
        january = Invoice.objects.get(organization=org, period="2027-01")
        assert (january.status, january.credits, january.total) == ("finalized", Decimal("-735.00"),
                                                                    Decimal("-735.00"))
        report.refresh_from_db()
        assert report.applied_invoice_id == january.id
        assert _preview(org)["credits"] == Decimal("0.00")  # applied once


def test_a_pending_credit_goes_on_the_month_to_date_when_its_own_month_is_the_last(tiers, fleet, host):
    """While January is in progress, December (the credit's own month, finalized) is the month before it: nothing
    is left to invoice first, so January's month to date carries December's credit (January is its next invoice)."""
    org, report = _december_credit(tiers, fleet, host)
    with time_machine.travel(utc(2027, 1, 20), tick=False):  # January in progress, December just before it
        assert _preview(org)["credits"] == Decimal("-735.00")


def test_downtime_minutes_count_each_started_minute_whole():
    from apps.billing.money import downtime_minutes

    assert [downtime_minutes(s) for s in (0, 1, 60, 61, 7230, Decimal("59.5"))] == [0, 1, 1, 2, 121, 1]
