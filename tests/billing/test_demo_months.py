"""The demo's closed months (`manage.py demo_load`; docs/admin-portal.md, "Trying billing"): on 10 March 2026 the
demo tenant has an instance of `h100-1x` ($2.49 an hour in the demo price book, standard tier) that ran through
January and February, placed and claimed in the allocation ledger, its GPU down 9 h by a provider fault on
10 January; January is invoiced (finalized) with its SLA report, and the invoice run for February - the billing
staff's to start - drafts the demo organization's invoice with February's usage and January's SLA credit, which a
billing admin can finalize and credit. Loading the demo twice changes nothing."""
import io
from decimal import Decimal

import pytest
import time_machine
from django.core.management import call_command

from apps.audit.models import AuditEvent
from apps.billing.models import Invoice, InvoiceRun, SlaReport, UsageRecord
from apps.billing.services import credit_note_create, invoice_finalize, invoice_run_execute
from apps.compute.models import Instance
from apps.inventory.models import Incident
from apps.scheduling.models import Allocation
from tests.tenancy.helpers import client_for, make_user, token_for

from .conftest import utc

pytestmark = pytest.mark.django_db

AT = utc(2026, 3, 10, 12)


def _data() -> dict:
    """What the demo's months consist of, row by row (ids included: a duplicate or a rewritten row differs)."""
    def rows(qs, *fields):
        return sorted(str(row) for row in qs.values_list(*fields))

    return {
        "instances": rows(Instance.objects, "id", "name", "status", "host_id", "launched_at", "deleted_at"),
        "allocations": rows(Allocation.objects, "id", "consumer_id", "gpu_id", "resource_class", "amount", "period"),
        "incidents": rows(Incident.objects, "id", "host_id", "gpu_id", "start", "end", "provider_at_fault"),
        "usage": rows(UsageRecord.objects, "id", "source_key", "start", "end", "sku"),
        "invoices": rows(Invoice.objects, "id", "period", "status", "number", "total"),
        "runs": rows(InvoiceRun.objects, "id", "period", "status"),
        "sla_reports": rows(SlaReport.objects, "id", "period", "credit_amount", "applied_invoice_id"),
        "audit": rows(AuditEvent.objects.filter(action__startswith="inventory.gpu."), "id", "action"),
    }


def test_demo_load_gives_last_month_s_invoice_run_usage_and_an_sla_credit_and_loads_once(tiers, monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "demo-months-test")
    out = io.StringIO()
    with time_machine.travel(AT, tick=False):
        call_command("demo_load", stdout=out)
        first = _data()
        call_command("demo_load", stdout=out)
        assert _data() == first  # idempotent: nothing added, nothing rewritten
    text = out.getvalue()
    assert ("billing: demo usage of 2026-01 and 2026-02: 1416 usage records recorded, invoice of 2026-01 finalized; "
            "run the invoice run for 2026-02 in the admin portal") in text, text
    assert "billing: demo usage of 2026-01 and 2026-02: 0 usage records recorded; run the invoice run" in text

    inst = Instance.objects.get(project__organization__slug="demo", name="demo-trainer-2026-02")
    assert (inst.status, inst.flavor.name, inst.launched_at, inst.deleted_at) == (
        "deleted", "h100-1x", utc(2026, 1, 1), utc(2026, 3, 1))
    gpu_row = Allocation.objects.get(consumer_id=inst.pk, resource_class="gpu")
    assert (gpu_row.period.lower, gpu_row.period.upper, gpu_row.host_id) == (utc(2026, 1, 1), utc(2026, 3, 1),
                                                                             inst.host_id)
    incident = Incident.objects.get(gpu_id=gpu_row.gpu_id)
    assert (incident.start, incident.end, incident.provider_at_fault) == (utc(2026, 1, 10, 3), utc(2026, 1, 10, 12),
                                                                          True)
    assert incident.gpu.health == "ok"  # opened and closed again
    # metered from the ledger by compute's usage source: every hour of January and February, once
    assert UsageRecord.objects.filter(resource_id=str(inst.pk)).count() == (31 + 28) * 24

    january = Invoice.objects.get(organization__slug="demo", period="2026-01")
    assert (january.status, january.total) == ("finalized", Decimal("1830.15"))  # 735 h x $2.49, 9 h down
    report = SlaReport.objects.get(resource_id=str(inst.pk), period="2026-01")
    assert (report.credit_pct, report.credit_amount, report.applied_invoice_id) == (Decimal("10"), Decimal("183.02"),
                                                                                    None)
    assert not Invoice.objects.filter(period="2026-02").exists()  # the billing staff's run, not the demo's

    with time_machine.travel(AT, tick=False):
        invoice_run_execute(period="2026-02", finalize=False)
        february = Invoice.objects.get(organization__slug="demo", period="2026-02")
        lines = {line.kind: line for line in february.lines.all()}
        assert set(lines) == {"usage", "sla_credit"}
        assert (lines["usage"].resource_id, lines["usage"].billed_seconds, lines["usage"].amount) == (
            str(inst.pk), Decimal(672 * 3600), Decimal("1673.28"))  # 672 h x $2.49
        assert lines["sla_credit"].amount == Decimal("-183.02")
        assert lines["sla_credit"].sla_report_id == report.pk
        assert lines["sla_credit"].description.startswith("SLA credit for 2026-01: Instance ")
        assert (february.status, february.total) == ("draft", Decimal("1490.26"))

        invoice_finalize(actor=None, invoice=february)
        note = credit_note_create(actor=None, invoice=february, amount=Decimal("100.00"), reason="goodwill")
    february.refresh_from_db()
    assert (february.status, february.total, february.credited, note.total) == (
        "finalized", Decimal("1490.26"), Decimal("100.00"), Decimal("100.00"))
    # the SLA report names the invoice the credit went on by its number, as a person reads it
    staff = client_for(token_for(make_user("billing@provider.test", staff_role="billing_admin"), staff=True))
    [row] = staff.get("/api/v1/sla-reports/", {"period": "2026-01"}).json()["results"]
    assert (row["applied_invoice"], row["applied_invoice_number"]) == (str(february.pk), february.display_number)
    assert february.display_number.startswith("INV-")


def test_a_later_month_s_load_adds_months_once_the_demo_s_instance_is_past_them(monkeypatch):
    """Loaded again in April, the demo's instance of January and February ran into the new first month (February):
    nothing is added; in May (March and April) the earlier instance is past them, so a new one runs March and April,
    with its own incident in March."""
    from apps.compute import demo as compute_demo
    from apps.inventory import demo as inventory_demo
    from apps.tenancy import demo as tenancy_demo

    monkeypatch.setenv("DEMO_PASSWORD", "demo-months-test")
    out = io.StringIO()
    for at in (AT, utc(2026, 4, 10, 12), utc(2026, 5, 10, 12)):
        with time_machine.travel(at, tick=False):
            for app in (tenancy_demo, inventory_demo, compute_demo):
                app.load_demo(out)
    assert sorted(Instance.objects.values_list("name", "launched_at", "deleted_at")) == [
        ("demo-trainer-2026-02", utc(2026, 1, 1), utc(2026, 3, 1)),
        ("demo-trainer-2026-04", utc(2026, 3, 1), utc(2026, 5, 1))]
    assert sorted(Incident.objects.values_list("start", "end")) == [(utc(2026, 1, 10, 3), utc(2026, 1, 10, 12)),
                                                                    (utc(2026, 3, 10, 3), utc(2026, 3, 10, 12))]
    assert "compute: demo instance demo-trainer-2026-02 present (ran until 2026-03-01)" in out.getvalue()
