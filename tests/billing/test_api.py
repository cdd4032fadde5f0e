"""Billing API: tenant scoping (billing role, other tenants, drafts), staff billing-admin flows, exports,
Idempotency-Key on payments (RW-057), re-rating windows (RW-059)."""
import csv
import datetime as dt
import io
import os
from decimal import Decimal
from pathlib import Path

import pytest
import time_machine

from apps.billing.models import Invoice, PriceBook
from apps.billing.services import invoice_run_execute
from apps.core.models import IdempotencyKey
from apps.identity.models import StaffRole
from apps.tenancy import selectors as tenancy_selectors
from apps.tenancy.authz import authorize_project
from apps.tenancy.errors import Forbidden
from tests.operations.helpers import drive
from tests.tenancy.helpers import client_for, make_user, member, token_for

from .conftest import H100, book, collect, incident, make_org, pdf_text, utc

pytestmark = pytest.mark.django_db


@pytest.fixture
def billed(tiers, fleet):
    """Organization acme with a finalized February 2026 invoice ($12.00) and a beta organization with its own."""
    book(utc(2026, 1, 1), {(H100, "standard", "on_demand"): "2.00"})
    acme, acme_p = make_org("acme")
    beta, beta_p = make_org("beta")
    fleet.run(acme, acme_p, "vm-a", utc(2026, 2, 1), utc(2026, 2, 1, 6), gpu_equivalents=Decimal(1))
    fleet.run(beta, beta_p, "vm-b", utc(2026, 2, 1), utc(2026, 2, 1, 1), gpu_equivalents=Decimal(1))
    collect(utc(2026, 2, 1), utc(2026, 2, 2))
    invoice_run_execute(period="2026-02")
    return acme, acme_p, beta


def _client(user, org=None):
    return client_for(token_for(user, organization=org, staff=org is None))


def _admin():
    return _client(make_user("ba@provider.test", staff_role=StaffRole.BILLING_ADMIN))


def test_billing_member_sees_invoices_but_cannot_manage_instances(billed):
    acme, project, beta = billed
    user = make_user("billing@acme.test")
    member(user, acme, "billing")
    client = _client(user, acme)
    rows = client.get("/api/v1/invoices/").json()["results"]
    assert [(r["period"], r["total"], r["status"]) for r in rows] == [("2026-02", "12.00", "finalized")]
    invoice = Invoice.objects.get(organization=acme)
    assert client.get(f"/api/v1/invoices/{invoice.pk}/").status_code == 200
    other = Invoice.objects.get(organization=beta)
    assert client.get(f"/api/v1/invoices/{other.pk}/").status_code == 404
    assert tenancy_selectors.project_role_of(user, project) == "viewer"
    with pytest.raises(Forbidden):
        authorize_project(user, project, ("admin", "member"))  # what instance writes require


def test_viewer_sees_usage_not_invoices_and_drafts_stay_hidden(billed, fleet):
    acme, project, _ = billed
    viewer = make_user("viewer@acme.test")
    member(viewer, acme, "viewer")
    client = _client(viewer, acme)
    assert client.get("/api/v1/invoices/").json()["results"] == []
    usage = client.get("/api/v1/usage/", {"project": str(project.pk)}).json()["results"]
    assert {u["resource_id"] for u in usage} == {"vm-a"} and len(usage) == 6
    assert client.get("/api/v1/usage/", {"sku": "nope"}).json()["results"] == []
    assert len(client.get("/api/v1/usage/", {"since": "2026-02-01T04:30:00Z"}).json()["results"]) == 2
    assert len(client.get("/api/v1/usage/", {"period": "2026-02"}).json()["results"]) == 6
    assert client.get("/api/v1/usage/", {"period": "2026-03"}).json()["results"] == []
    assert client.get("/api/v1/usage/", {"period": "2026-13"}).status_code == 400
    owner = make_user("owner@acme.test")
    member(owner, acme, "owner")
    invoice_run_execute(period="2026-03", finalize=False)  # nothing in March: no draft
    fleet.run(acme, project, "vm-c", utc(2026, 3, 1), utc(2026, 3, 1, 1))
    collect(utc(2026, 3, 1), utc(2026, 3, 2))
    invoice_run_execute(period="2026-03", finalize=False)
    assert Invoice.objects.filter(organization=acme, period="2026-03", status="draft").exists()
    periods = [r["period"] for r in _client(owner, acme).get("/api/v1/invoices/").json()["results"]]
    assert periods == ["2026-02"]


def test_exports_csv_and_pdf(billed):
    acme, _, _ = billed
    owner = make_user("owner@acme.test")
    member(owner, acme, "owner")
    invoice = Invoice.objects.get(organization=acme)
    client = _client(owner, acme)
    csv_text = client.get(f"/api/v1/invoices/{invoice.pk}/csv/").content.decode()
    rows = list(csv.reader(io.StringIO(csv_text)))
    assert rows[0][0] == "invoice_number" and rows[1][2] == "usage" and rows[1][13] == "12.00"
    assert rows[-1][2] == "total" and rows[-1][13] == "12.00"
    pdf = client.get(f"/api/v1/invoices/{invoice.pk}/pdf/")
    assert pdf["Content-Type"] == "application/pdf" and pdf.content.startswith(b"%PDF-")
    text = pdf_text(pdf.content)
    assert invoice.display_number in text and "12.00" in text
    # the line in the same words on both: the rated description, not the raw type, id and SKU
    assert rows[1][9] == "Instance vm-a (1 × H100-SXM5-80GB GPU), on demand"
    assert rows[1][9] in text and "gpu:gpu_count=1" not in text


def test_pay_with_idempotency_key(billed):
    """RW-057 (a)-(e)."""
    acme, _, _ = billed
    invoice = Invoice.objects.get(organization=acme)
    client = _admin()
    url = f"/api/v1/invoices/{invoice.pk}/pay/"
    # (d) a first attempt that fails validation is not stored; the corrected retry is processed
    bad = client.post(url, {"amount": "11.00"}, format="json", HTTP_IDEMPOTENCY_KEY="K")
    assert (bad.status_code, bad.json()["code"]) == (400, "payment_amount_mismatch")
    assert not IdempotencyKey.objects.exists()
    first = client.post(url, {"amount": "12.00", "reference": "wire-1"}, format="json", HTTP_IDEMPOTENCY_KEY="K")
    assert first.status_code == 200 and first.json()["status"] == "paid"
    # (a) same key and body after a client timeout: same answer, no second payment
    again = client.post(url, {"amount": "12.00", "reference": "wire-1"}, format="json", HTTP_IDEMPOTENCY_KEY="K")
    assert (again.status_code, again.json(), again["Idempotent-Replayed"]) == (200, first.json(), "true")
    # (b) same key, different amount: rejected, nothing changes
    other = client.post(url, {"amount": "13.00", "reference": "wire-1"}, format="json", HTTP_IDEMPOTENCY_KEY="K")
    assert (other.status_code, other.json()["code"]) == (422, "idempotency_key_reused")
    # (c) a duplicate while the first is still executing waits for it and replays it (one payment): see
    # tests/compute/test_idempotency.py for the concurrent case
    # (e) the same key after 25 h is a new request (here: the invoice is already paid -> 409 invalid_state)
    with time_machine.travel(dt.datetime.now(dt.UTC) + dt.timedelta(hours=25)):
        late = client.post(url, {"amount": "12.00", "reference": "wire-1"}, format="json", HTTP_IDEMPOTENCY_KEY="K")
    assert (late.status_code, late.json()["code"]) == (409, "invalid_state")


def test_staff_flows_tiers_books_runs_credit_notes_void_reports(billed, fleet):
    acme, project, _ = billed
    client = _admin()
    bad = client.post("/api/v1/sla-tiers/", {"code": "gold", "name": "Gold", "target_uptime_pct": "99.95",
                                             "credit_schedule": [{"below": "99.95", "credit_pct": "50"},
                                                                 {"below": "99.0", "credit_pct": "10"}],
                                             "support_response_minutes": 15}, format="json")
    assert (bad.status_code, bad.json()["code"]) == (400, "invalid_credit_schedule")
    tier = client.post("/api/v1/sla-tiers/", {"code": "gold", "name": "Gold", "target_uptime_pct": "99.95",
                                              "credit_schedule": [{"below": "99.95", "credit_pct": "10"}],
                                              "support_response_minutes": 15}, format="json")
    assert tier.status_code == 201
    patched = client.patch(f"/api/v1/sla-tiers/{tier.json()['id']}/", {"support_response_minutes": 10}, format="json")
    assert patched.json()["support_response_minutes"] == 10

    with time_machine.travel(utc(2026, 3, 20), tick=False):       # published in March, for April
        new_book = client.post("/api/v1/price-books/", {"name": "2026-04", "currency": "usd",
                                                        "effective_from": "2026-04-01T00:00:00Z"}, format="json")
    assert (new_book.status_code, new_book.json()["currency"]) == (201, "USD")
    price = client.post(f"/api/v1/price-books/{new_book.json()['id']}/prices/",
                        {"sku": "gpu:model=H100-SXM5-80GB,gpu_count=1", "sla_tier": "standard",
                         "pricing_model": "on_demand", "unit_price": "1.50"}, format="json")
    assert price.json()["sku"] == H100
    assert client.post("/api/v1/price-books/", {"name": "x", "currency": "ZZZ",
                                                "effective_from": "2026-05-01T00:00:00Z"},
                       format="json").json()["code"] == "invalid_currency"
    # a new version that starts in the past would re-price what drafts already billed: refused on its field, and
    # the finalized February invoice stays as billed
    inside = client.post("/api/v1/price-books/", {"name": "x", "currency": "USD",
                                                  "effective_from": "2026-02-10T00:00:00Z"}, format="json")
    assert (inside.status_code, inside.json()["code"]) == (400, "price_book_backdated")
    assert list(inside.json()["errors"]) == ["effective_from"]
    assert not PriceBook.objects.filter(name="x").exists()
    assert Invoice.objects.get(organization=acme, period="2026-02").total == Decimal("12.00")  # frozen as billed

    fleet.run(acme, project, "vm-a", utc(2026, 4, 1), utc(2026, 4, 1, 2))
    collect(utc(2026, 4, 1), utc(2026, 4, 2))
    adj = client.post("/api/v1/adjustments/", {"organization": str(acme.pk), "period": "2026-04", "amount": "-1.00",
                                               "description": "goodwill"}, format="json")
    assert adj.status_code == 201
    resp = client.post("/api/v1/invoice-runs/", {"period": "2026-04"}, format="json")
    assert resp.status_code == 202 and resp.json()["status"] == "pending"
    assert resp["Location"] == f"/api/v1/operations/{resp.json()['operation']}"
    drive(resp.json()["operation"])
    run = client.get(f"/api/v1/invoice-runs/{resp.json()['id']}/").json()
    assert (run["status"], run["invoices_finalized"]) == ("completed", 1)
    april = Invoice.objects.get(organization=acme, period="2026-04")
    assert (april.subtotal, april.total) == (Decimal("2.00"), Decimal("2.00"))  # 2 h x $1.50 - $1.00

    note = client.post("/api/v1/credit-notes/", {"invoice": str(april.pk), "amount": "0.50", "reason": "goodwill"},
                       format="json", HTTP_IDEMPOTENCY_KEY="cn-1")
    assert note.status_code == 201 and note.json()["total"] == "0.50"
    replay = client.post("/api/v1/credit-notes/", {"invoice": str(april.pk), "amount": "0.50", "reason": "goodwill"},
                         format="json", HTTP_IDEMPOTENCY_KEY="cn-1")
    assert replay.json()["number"] == note.json()["number"]
    too_much = client.post("/api/v1/credit-notes/", {"invoice": str(april.pk), "amount": "5.00", "reason": "x"},
                           format="json")
    assert too_much.json()["code"] == "credit_note_exceeds_balance"
    april.refresh_from_db()
    assert april.balance_due == Decimal("1.50")
    refused = client.post(f"/api/v1/invoices/{april.pk}/void/", {"reason": "wrong customer"}, format="json")
    assert (refused.status_code, refused.json()["code"]) == (409, "invoice_has_credit_notes")
    assert refused.json()["credit_notes"] == [note.json()["display_number"]]
    april.refresh_from_db()
    assert april.status == "finalized"  # the credit note still corrects a standing invoice

    unaligned = client.post("/api/v1/billing/rerate/", {"start": "2026-05-01T10:30:00Z",
                                                        "end": "2026-05-01T11:30:00Z"}, format="json")
    assert (unaligned.status_code, unaligned.json()["code"]) == (400, "window_not_aligned")
    assert client.post("/api/v1/billing/rerate/", {"start": "2026-05-01T10:00:00Z", "end": "2026-05-01T12:00:00Z"},
                       format="json").status_code == 200

    revenue = client.get("/api/v1/billing/reports/revenue/", {"period_from": "2026-01", "period_to": "2026-12",
                                                              "group_by": "organization"}).json()
    assert revenue == [{"key": "acme", "currency": "USD", "amount": "13.50"},  # + April: 3.00 - 1.00 - 0.50
                       {"key": "beta", "currency": "USD", "amount": "2.00"}]
    by_model = client.get("/api/v1/billing/reports/revenue/", {"period_from": "2026-01", "period_to": "2026-12",
                                                               "group_by": "gpu_model"}).json()
    assert by_model == [{"key": "", "currency": "USD", "amount": "-1.50"},  # April's adjustment and credit note
                        {"key": "H100-SXM5-80GB", "currency": "USD", "amount": "17.00"}]
    backwards = client.get("/api/v1/billing/reports/revenue/", {"period_from": "2026-12", "period_to": "2026-01"})
    assert (backwards.status_code, backwards.json()["code"]) == (400, "invalid_period")
    assert "period_to" in backwards.json()["errors"]
    util = client.get("/api/v1/billing/reports/utilization/", {"since": "2026-02-01T00:00:00Z",
                                                               "until": "2026-03-01T00:00:00Z"}).json()
    assert util == [{"key": "acme", "gpu_hours": "6.0000"}, {"key": "beta", "gpu_hours": "1.0000"}]


def test_billing_account_tax_rate_applies_to_the_next_draft(billed, fleet):
    acme, project, _ = billed
    client = _admin()
    bad = client.post("/api/v1/billing-accounts/", {"organization": str(acme.pk), "tax_rate": "1.5"}, format="json")
    assert bad.status_code == 400
    ok = client.post("/api/v1/billing-accounts/", {"organization": str(acme.pk), "tax_rate": "0.19"}, format="json")
    assert (ok.status_code, ok.json()["tax_rate"]) == (201, "0.19000")  # the account is created
    fleet.run(acme, project, "vm-a", utc(2026, 5, 1), utc(2026, 5, 1, 5))
    collect(utc(2026, 5, 1), utc(2026, 5, 2))
    invoice_run_execute(period="2026-05")
    may = Invoice.objects.get(organization=acme, period="2026-05")
    assert (may.subtotal, may.tax, may.total) == (Decimal("10.00"), Decimal("1.90"), Decimal("11.90"))
    assert Invoice.objects.get(organization=acme, period="2026-02").tax == Decimal("0.00")  # finalized: unchanged


def test_operator_staff_reads_but_cannot_write_billing(billed):
    client = _client(make_user("op@provider.test", staff_role=StaffRole.OPERATOR))
    assert client.get("/api/v1/price-books/").status_code == 200
    assert client.post("/api/v1/invoice-runs/", {"period": "2026-02"}, format="json").status_code == 403


def test_usage_of_an_invoice_line(billed, fleet):
    """`/usage/?invoice_line=`: the records behind a usage line (its resource, SKU, model and tier in the invoice's
    period), none for another kind of line; another tenant's line is `Not found.` like a missing one."""
    acme, project, beta = billed
    fleet.run(acme, project, "vm-other", utc(2026, 2, 3), utc(2026, 2, 3, 2), gpu_equivalents=Decimal(1))
    fleet.run(acme, project, "vm-a", utc(2026, 3, 1), utc(2026, 3, 1, 1), key="vm-a:march")  # the next month
    collect(utc(2026, 2, 1), utc(2026, 3, 2))
    owner = make_user("owner@acme.test")
    member(owner, acme, "owner")
    client = _client(owner, acme)
    invoice = Invoice.objects.get(organization=acme, period="2026-02")
    line = invoice.lines.get(resource_id="vm-a")
    rows = client.get("/api/v1/usage/", {"invoice_line": str(line.pk), "page_size": 50}).json()["results"]
    assert len(rows) == 6 and {r["resource_id"] for r in rows} == {"vm-a"}
    assert min(r["start"] for r in rows) == "2026-02-01T00:00:00Z" and max(r["end"] for r in rows) == \
        "2026-02-01T06:00:00Z"
    other = Invoice.objects.get(organization=beta).lines.get()
    r = client.get("/api/v1/usage/", {"invoice_line": str(other.pk)})
    assert r.status_code == 400 and r.json()["errors"]["invoice_line"] == ["Not found."]
    missing = client.get("/api/v1/usage/", {"invoice_line": "00000000-0000-0000-0000-000000000000"})
    assert missing.status_code == 400 and missing.json()["errors"] == r.json()["errors"]


def test_invoice_preview_is_the_month_so_far_and_writes_nothing(billed, fleet):
    """`/invoices/preview/?organization=`: the current month rated now from the recorded usage, never stored; only
    for those who read the organization's bills."""
    from apps.billing.models import InvoiceLine, InvoiceRun

    acme, project, beta = billed
    fleet.run(acme, project, "vm-m", utc(2026, 3, 1), utc(2026, 3, 1, 3), gpu_equivalents=Decimal(1))
    collect(utc(2026, 3, 1), utc(2026, 3, 2))
    owner = make_user("owner@acme.test")
    member(owner, acme, "owner")
    viewer = make_user("viewer@acme.test")
    member(viewer, acme, "viewer")
    counts = (Invoice.objects.count(), InvoiceLine.objects.count(), InvoiceRun.objects.count())
    with time_machine.travel(utc(2026, 3, 10, 12), tick=False):
        r = _client(owner, acme).get("/api/v1/invoices/preview/", {"organization": str(acme.pk)})
        assert r.status_code == 200, r.content
        body = r.json()
        assert (body["period"], body["status"], body["currency"], body["total"]) == ("2026-03", "draft", "USD",
                                                                                      "6.00")
        assert [(ln["resource_id"], ln["amount"]) for ln in body["lines"]] == [("vm-m", "6.00")]
        assert body["usage_until"] == "2026-03-01T03:00:00Z"
        assert (Invoice.objects.count(), InvoiceLine.objects.count(), InvoiceRun.objects.count()) == counts
        for client, org in ((_client(viewer, acme), acme), (_client(owner, acme), beta)):
            r = client.get("/api/v1/invoices/preview/", {"organization": str(org.pk)})
            assert r.status_code == 400 and r.json()["errors"]["organization"] == ["Not found."], r.content
        assert _client(owner, acme).get("/api/v1/invoices/preview/").status_code == 400
    with time_machine.travel(utc(2026, 2, 20), tick=False):  # February is finalized: its invoice as it is
        body = _client(owner, acme).get("/api/v1/invoices/preview/", {"organization": str(acme.pk)}).json()
        assert (body["period"], body["status"], body["total"]) == ("2026-02", "finalized", "12.00")


def test_invoice_preview_leaves_out_provider_fault_downtime_at_once(billed, fleet, host):
    """An incident with the provider at fault on a VM's host shows in the preview as soon as it is recorded (closed,
    or still open until now): its time is not charged, with no invoice run or nightly task between, and the GET
    still writes nothing (not even the downtime it derives)."""
    from apps.billing.models import DowntimeInterval
    from apps.billing.services import downtime_sync
    from apps.inventory.models import Incident

    acme, project, _ = billed
    h1, h2 = host("gpu-node-1"), host("gpu-node-2")
    fleet.run(acme, project, "vm-c", utc(2026, 3, 1), utc(2026, 3, 1, 3), gpu_equivalents=Decimal(1))
    fleet.run(acme, project, "vm-o", utc(2026, 3, 1), utc(2026, 3, 1, 3), gpu_equivalents=Decimal(1))
    fleet.place(h1.id, "vm-c", utc(2026, 2, 28))
    fleet.place(h2.id, "vm-o", utc(2026, 2, 28), utc(2026, 3, 1, 3))
    collect(utc(2026, 3, 1), utc(2026, 3, 2))
    owner = make_user("owner@acme.test")
    member(owner, acme, "owner")
    with time_machine.travel(utc(2026, 3, 1, 5), tick=False):
        incident(h1, utc(2026, 3, 1, 1), utc(2026, 3, 1, 2))  # closed: 1 h
        incident(h2, utc(2026, 3, 1, 2, 30), None)  # still open: 30 min of vm-o's placement
        body = _client(owner, acme).get("/api/v1/invoices/preview/", {"organization": str(acme.pk)}).json()
        assert {ln["resource_id"]: (ln["billed_seconds"], ln["amount"]) for ln in body["lines"]} == {
            "vm-c": ("7200.000000", "4.00"), "vm-o": ("9000.000000", "5.00")}  # before: 10800 s, 6.00 each
        assert body["total"] == "9.00"
        assert not DowntimeInterval.objects.exists()
        downtime_sync(window_start=utc(2026, 3, 1), window_end=utc(2026, 4, 1))  # a run's sync, committed
        Incident.objects.filter(host=h2).update(end=utc(2026, 3, 1, 2, 45))  # vm-o's incident closes after it
        body = _client(owner, acme).get("/api/v1/invoices/preview/", {"organization": str(acme.pk)}).json()
        assert {ln["resource_id"]: ln["amount"] for ln in body["lines"]} == {"vm-c": "4.00", "vm-o": "5.50"}


def test_invoice_of_a_period_not_ended_refuses_finalize(billed, fleet):
    """A draft of the month in progress (the running preview) cannot be finalized: 409 `period_not_ended` with the
    period's end; the draft stays a draft, unnumbered, and finalizes once the month is over."""
    acme, project, _ = billed
    client = _admin()
    fleet.run(acme, project, "vm-a", utc(2026, 5, 1), utc(2026, 5, 1, 2))
    with time_machine.travel(utc(2026, 5, 10, 12), tick=False):
        invoice_run_execute(period="2026-05", finalize=False)
        draft = Invoice.objects.get(organization=acme, period="2026-05")
        resp = client.post(f"/api/v1/invoices/{draft.pk}/finalize/")
        assert resp.status_code == 409 and resp["Content-Type"] == "application/problem+json"
        assert (resp.json()["code"], resp.json()["period_end"]) == ("period_not_ended", "2026-06-01T00:00:00+00:00")
        draft.refresh_from_db()
        assert (draft.status, draft.number, draft.total) == ("draft", None, Decimal("4.00"))
    with time_machine.travel(utc(2026, 6, 1, 0, 0, 1), tick=False):
        done = client.post(f"/api/v1/invoices/{draft.pk}/finalize/")
        assert (done.status_code, done.json()["status"]) == (200, "finalized")


def test_revenue_report_nets_credit_notes(billed):
    """acme's February invoice ($12.00) gets a $2.50 credit note: revenue is $9.50 for acme; by GPU model the
    credit, which names no model, nets under the empty key, so the rows still add up to the net $11.50. A credit
    note counts in its invoice's period: a range without February has none."""
    from apps.billing.services import credit_note_create

    acme, project, beta = billed
    client = _admin()
    february = Invoice.objects.get(organization=acme, period="2026-02")
    credit_note_create(actor=None, invoice=february, amount=Decimal("2.50"), reason="goodwill")
    query = {"period_from": "2026-01", "period_to": "2026-12"}
    by_org = client.get("/api/v1/billing/reports/revenue/", {**query, "group_by": "organization"}).json()
    assert by_org == [{"key": "acme", "currency": "USD", "amount": "9.50"},
                      {"key": "beta", "currency": "USD", "amount": "2.00"}]
    by_model = client.get("/api/v1/billing/reports/revenue/", {**query, "group_by": "gpu_model"}).json()
    assert by_model == [{"key": "", "currency": "USD", "amount": "-2.50"},
                        {"key": "H100-SXM5-80GB", "currency": "USD", "amount": "14.00"}]
    later = client.get("/api/v1/billing/reports/revenue/", {"period_from": "2026-03", "period_to": "2026-12",
                                                           "group_by": "organization"}).json()
    assert later == []


def test_credit_note_exports_and_invoice_pdf_parties_dates_and_credits(tiers, fleet, settings, tmp_path):
    """Credit notes export like invoices (CSV rows and totals; a PDF); the invoice PDF names the seller (settings)
    and the buyer (its legal name, in letters outside Latin-1, and its billing account), the issue and due dates
    (finalization + payment terms), the line in words, the tax with its rate and the credit notes applied, down
    to the balance due. February 2026 of a German buyer at 19 % VAT, invoiced on 1 March (the clock frozen at
    the beat's run), a goodwill credit note on 5 March."""
    from apps.billing.services import billing_account_update, credit_note_create, tax_rate_create

    settings.BILLING_SELLER_NAME = "Example GPU Cloud GmbH"
    settings.BILLING_SELLER_ADDRESS = "Rechenweg 1\n10115 Berlin"
    settings.BILLING_SELLER_TAX_ID = "DE123456789"
    settings.BILLING_SELLER_COUNTRY = "DE"
    settings.BILLING_PAYMENT_TERMS_DAYS = 14
    tax_rate_create(actor=None, country="DE", name="VAT", rate=Decimal("19"), effective_from=dt.date(2021, 1, 1))
    book(utc(2026, 1, 1), {(H100, "standard", "on_demand"): "2.00"}, currency="EUR")
    acme, project = make_org("acme", currency="EUR")
    acme.legal_name = "Łukasiewicz & Erdős Compute GmbH"  # what the tenant edits (Ł, ő: not in Latin-1)
    acme.save(update_fields=["legal_name"])
    billing_account_update(actor=None, organization=acme, country="DE", tax_id="DE987654321",
                           address="Hafenstraße 5\n20457 Hamburg")
    fleet.run(acme, project, "0190a3b4-7c2d-7e41-9a55-5d8e3f2e1d0c", utc(2026, 2, 1), utc(2026, 2, 1, 6),
              gpu_equivalents=Decimal(1))
    collect(utc(2026, 2, 1), utc(2026, 2, 2))
    with time_machine.travel(utc(2026, 3, 1, 0, 20), tick=False):   # the beat's run once February has ended
        invoice_run_execute(period="2026-02")
    invoice = Invoice.objects.get(organization=acme)
    assert (invoice.status, invoice.tax_rate, invoice.subtotal, invoice.tax, invoice.total) == (
        "finalized", Decimal("0.19000"), Decimal("12.00"), Decimal("2.28"), Decimal("14.28"))
    owner = make_user("owner@acme.test")
    member(owner, acme, "owner")
    client = _client(owner, acme)
    with time_machine.travel(utc(2026, 3, 5, 9), tick=False):
        note = credit_note_create(actor=None, invoice=invoice, amount=Decimal("2.50"), reason="goodwill: slow disk")

    rows = list(csv.reader(io.StringIO(client.get(f"/api/v1/credit-notes/{note.pk}/csv/").content.decode())))
    head = [note.display_number, invoice.display_number, "2026-02", "2026-03-05T09:00:00+00:00"]
    assert rows == [
        ["credit_note_number", "invoice_number", "period", "issued_at", "kind", "description", "amount",
         "tax_amount", "currency"],
        [*head, "credit", "goodwill: slow disk", "2.50", "0.48", "EUR"],
        [*head, "amount", "", "2.50", "", "EUR"],
        [*head, "tax", "Tax (19 %)", "0.48", "", "EUR"],
        [*head, "total", "", "2.98", "", "EUR"]]
    note_pdf = client.get(f"/api/v1/credit-notes/{note.pk}/pdf/")
    assert note_pdf["Content-Type"] == "application/pdf" and note_pdf.content.startswith(b"%PDF-")
    pdf = client.get(f"/api/v1/invoices/{invoice.pk}/pdf/").content

    # what a finance team opens: both documents rendered with PDFium (into the test's directory; `make
    # docs-pictures` writes them to docs/billing/, which docs/billing.md shows), every line drawn inside the page
    # and the drawn text, read back from the rendering, in reading order
    out = DOCUMENTS if os.environ.get("UPDATE_DOCS_PICTURES") else tmp_path
    note_text = _render(note_pdf.content, out / "credit-note")
    for text in (f"Credit note {note.display_number} - Łukasiewicz & Erdős Compute GmbH", "From:",
                 "Example GPU Cloud GmbH", "Bill to:", "Łukasiewicz & Erdős Compute GmbH", "Hafenstraße 5",
                 "20457 Hamburg", "Tax ID: DE987654321", "Issue date: 2026-03-05",
                 f"Corrects invoice {invoice.display_number}", "of period 2026-02 (UTC)", "Reason: goodwill: slow disk",
                 "Amount: 2.50 EUR", "Tax (19 %): 0.48 EUR", "Total credited: 2.98 EUR"):
        assert text in note_text, text
    assert note_text.index("Example GPU Cloud GmbH") < note_text.index("goodwill: slow disk") \
        < note_text.index("Total credited: 2.98 EUR")
    text = _render(pdf, out / "invoice")
    order = [f"Invoice {invoice.display_number} - Łukasiewicz & Erdős Compute GmbH - 2026-02", "From:",
             "Example GPU Cloud GmbH", "Rechenweg 1", "10115 Berlin", "Tax ID: DE123456789",
             "Bill to:", "Łukasiewicz & Erdős Compute GmbH", "Hafenstraße 5", "20457 Hamburg",
             "Tax ID: DE987654321", "Issue date: 2026-03-01", "Due date: 2026-03-15", "Period: 2026-02 (UTC)",
             "Instance 3f2e1d0c (1 × H100-SXM5-80GB GPU), on demand", "Subtotal: 12.00 EUR", "SLA credits: 0.00 EUR", "Tax (19 %): 2.28 EUR",
             "Total: 14.28 EUR", f"Credit note {note.display_number} of 2026-03-05: -2.98 EUR",
             "Balance due: 11.30 EUR"]
    at = 0
    for part in order:   # each after the one before
        assert part in text[at:], (part, text)
        at = text.index(part, at) + len(part)


def test_a_missing_pdf_font_fails_the_system_check_and_the_render_not_the_letters(billed, settings, tmp_path):
    """The PDFs' font is a setting: a path that is not a font stops `manage.py check` (and `migrate`) with
    billing.E001, and a PDF asked for anyway is an error naming the setting, never a document with '?' for
    letters the font would have had."""
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    from apps.billing import exports

    call_command("check")
    (tmp_path / "not-a-font.ttf").write_text("hello")
    settings.BILLING_PDF_FONT = str(tmp_path / "missing.ttf")
    settings.BILLING_PDF_FONT_BOLD = str(tmp_path / "not-a-font.ttf")
    with pytest.raises(SystemCheckError) as failed:
        call_command("check")
    assert "billing.E001" in str(failed.value) and "BILLING_PDF_FONT = " in str(failed.value)
    assert "BILLING_PDF_FONT_BOLD = " in str(failed.value) and "not a TrueType" in str(failed.value)
    with pytest.raises(ImproperlyConfigured, match="BILLING_PDF_FONT"):
        exports.invoice_pdf(Invoice.objects.get(organization=billed[0]))


DOCUMENTS = Path(__file__).resolve().parents[2] / "docs" / "billing"


def _render(pdf: bytes, stem: Path) -> str:
    """Render each page of `pdf` at 100 dpi with PDFium into <stem>[-<n>].png; assert that nothing is drawn within
    10 pt of the page's edges (a line cut off or run over the margin); return the text PDFium reads."""
    import pypdfium2 as pdfium
    from PIL import ImageChops, ImageOps

    doc = pdfium.PdfDocument(pdf)
    stem.parent.mkdir(parents=True, exist_ok=True)
    name = stem.name
    texts = []
    for n, page in enumerate(doc):
        image = page.render(scale=100 / 72).to_pil().convert("L")
        image.save(stem.parent / (f"{name}.png" if n == 0 else f"{name}-{n + 1}.png"))
        ink = ImageChops.invert(ImageOps.autocontrast(image)).point(lambda v: 255 if v > 64 else 0).getbbox()
        margin = round(10 * 100 / 72)
        assert ink is not None, f"{name}: page {n + 1} is blank"
        assert ink[0] >= margin and ink[1] >= margin and ink[2] <= image.width - margin \
            and ink[3] <= image.height - margin, f"{name}: page {n + 1} drawn into the margin: {ink} of {image.size}"
        texts.append(page.get_textpage().get_text_range())
    return "\n".join(texts)


def test_setting_a_price_answers_201_when_created_and_200_when_replaced(billed):
    """`POST /price-books/{id}/prices` creates the price of a key (201) or replaces the book's price of that key
    (200; the SKU as typed by hand is the same key)."""
    from apps.billing.models import Price, PriceBook

    client = _admin()
    book_id = PriceBook.objects.get().pk
    body = {"sku": "gpu:model=A100", "sla_tier": "standard", "pricing_model": "on_demand", "unit_price": "1.50"}
    created = client.post(f"/api/v1/price-books/{book_id}/prices/", body, format="json")
    assert created.status_code == 201, created.content
    replaced = client.post(f"/api/v1/price-books/{book_id}/prices/", {**body, "unit_price": "1.75"}, format="json")
    assert (replaced.status_code, replaced.json()["id"], replaced.json()["unit_price"]) == (
        200, created.json()["id"], "1.750000")
    assert Price.objects.filter(book_id=book_id, sku="gpu:model=A100").count() == 1


def test_an_invoice_says_which_actions_the_caller_may_take_now(billed, fleet):
    """`allowed_actions`: a draft of a month in progress offers nothing, once the month is over `finalize`; a
    finalized invoice `pay`, `void` and `credit_note`, and no `void` once credited; a paid one only `credit_note`.
    Support staff and tenants are offered nothing. Each offered action is one the server then takes."""
    from apps.billing.services import credit_note_create

    acme, project, _ = billed
    admin = _admin()
    support = client_for(token_for(make_user("support@provider.test", staff_role=StaffRole.SUPPORT), staff=True))
    owner = make_user("owner@acme.example")
    member(owner, acme, "owner")
    fleet.run(acme, project, "vm-a", utc(2026, 5, 1), utc(2026, 5, 1, 2))
    url = None

    def actions(client=admin):
        return client.get(url).json()["allowed_actions"]

    with time_machine.travel(utc(2026, 5, 10, 12), tick=False):
        invoice_run_execute(period="2026-05", finalize=False)
        draft = Invoice.objects.get(organization=acme, period="2026-05")
        url = f"/api/v1/invoices/{draft.pk}/"
        assert actions() == []
    with time_machine.travel(utc(2026, 6, 1, 0, 0, 1), tick=False):
        assert actions() == ["finalize"] and actions(support) == []
        assert admin.post(f"{url}finalize/").status_code == 200
        assert actions() == ["pay", "void", "credit_note"]
        assert actions(support) == [] and actions(_client(owner, acme)) == []
        credit_note_create(actor=None, invoice=Invoice.objects.get(pk=draft.pk), amount=Decimal("1.00"), reason="x")
        assert actions() == ["pay", "credit_note"]
        balance = admin.get(url).json()["balance_due"]
        assert admin.post(f"{url}pay/", {"amount": balance}).status_code == 200
        assert actions() == ["credit_note"]
