"""Invoice runs requested through the API run as an operation: prepare, one committed batch per step, complete;
a killed worker resumes at the next batch; one unfinished run per period; a failed operation fails the run."""
import datetime as dt
from decimal import Decimal

import pytest
import time_machine

from apps.billing.models import Invoice, InvoiceRun, NumberSequence
from apps.billing.services import invoice_run_request, invoicing
from apps.core.errors import Conflict, ValidationFailed
from apps.identity.models import StaffRole
from apps.operations.models import Operation
from apps.operations.runner import operation_resume_stalled, operation_run_step
from tests.operations.helpers import drive
from tests.tenancy.helpers import client_for, make_user, token_for

from .test_invoices import _snapshot, _three_orgs

pytestmark = pytest.mark.django_db


@pytest.fixture
def billing_client():
    admin = make_user("billing@provider.test", staff_role=StaffRole.BILLING_ADMIN)
    return client_for(token_for(admin, staff=True))


def test_post_answers_202_pending_and_a_worker_completes_it_batch_by_batch(tiers, fleet, settings, billing_client):
    settings.BILLING_RUN_BATCH_SIZE = 2
    _three_orgs(fleet)  # five organizations: batches of 2, 2, 1
    first_number = NumberSequence.objects.get(name="invoice").next_value
    resp = billing_client.post("/api/v1/invoice-runs", {"period": "2026-02"}, format="json")
    assert resp.status_code == 202, resp.content
    body = resp.json()
    assert body["status"] == "pending" and body["invoices_finalized"] == 0
    assert resp["Location"] == f"/api/v1/operations/{body['operation']}"
    assert not Invoice.objects.exists()  # nothing is invoiced in the request
    steps = [operation_run_step(body["operation"]) for _ in range(5)]
    assert steps == ["prepare", "invoice", "invoice", "invoice", "complete"]
    run = billing_client.get(f"/api/v1/invoice-runs/{body['id']}").json()
    assert (run["status"], run["invoices_drafted"], run["invoices_finalized"]) == ("completed", 5, 5)
    op = billing_client.get(f"/api/v1/operations/{body['operation']}").json()
    assert (op["status"], op["steps_done"]) == ("succeeded", ["prepare", "invoice", "complete"])
    rows = _snapshot()
    assert [row[2] for row in rows] == list(range(first_number, first_number + 5))  # gap-free, org-id order
    assert [row[3] for row in rows] == [Decimal("1.50") * (i + 1) for i in range(5)]


def test_worker_killed_after_a_batch_resumes_at_the_next_one(tiers, fleet, settings, monkeypatch):
    settings.BILLING_RUN_BATCH_SIZE = 2
    _three_orgs(fleet)
    first_number = NumberSequence.objects.get(name="invoice").next_value
    run = invoice_run_request(actor=None, period="2026-02")
    operation_run_step(run.operation_id)  # prepare
    operation_run_step(run.operation_id)  # first batch
    crashed = []

    def crash(run, batch):
        crashed.append(batch)
        raise RuntimeError("worker killed")
    monkeypatch.setattr(invoicing, "after_batch_hook", crash)
    with pytest.raises(RuntimeError):
        operation_run_step(run.operation_id)  # the second batch dies before its step commits
    assert crashed == [1]
    assert Invoice.objects.filter(period="2026-02", status="finalized").count() == 2  # batch 2 rolled back
    run.refresh_from_db()
    assert (run.status, run.invoices_finalized) == ("running", 2)
    monkeypatch.setattr(invoicing, "after_batch_hook", None)
    with time_machine.travel(dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)):
        assert operation_resume_stalled() >= 1  # the beat re-sends it
    assert drive(run.operation_id).status == "succeeded"
    run.refresh_from_db()
    assert (run.status, run.invoices_finalized) == ("completed", 5)
    rows = _snapshot()
    assert [row[2] for row in rows] == list(range(first_number, first_number + 5))
    assert [row[3] for row in rows] == [Decimal("1.50") * (i + 1) for i in range(5)]


def test_one_unfinished_run_per_period_and_finalize(tiers, fleet, billing_client):
    _three_orgs(fleet, n=1)
    first = invoice_run_request(actor=None, period="2026-02")
    with pytest.raises(Conflict) as exc:
        invoice_run_request(actor=None, period="2026-02")
    assert exc.value.code == "invoice_run_in_progress" and str(first.id) in str(exc.value)
    resp = billing_client.post("/api/v1/invoice-runs", {"period": "2026-02"}, format="json")
    assert resp.status_code == 409 and resp.json()["code"] == "invoice_run_in_progress"
    assert InvoiceRun.objects.count() == 1 and Operation.objects.count() == 1  # the refused request wrote nothing
    preview = invoice_run_request(actor=None, period="2026-02", finalize=False)  # a preview is another run
    other = invoice_run_request(actor=None, period="2026-03")
    assert drive(first.operation_id).status == "succeeded"
    again = invoice_run_request(actor=None, period="2026-02")  # finished: a rerun is allowed
    assert drive(again.operation_id).status == "succeeded"
    assert Invoice.objects.get(period="2026-02").status == "finalized"
    assert {preview.period, other.period} == {"2026-02", "2026-03"}


def test_a_failed_operation_fails_the_run(tiers, fleet):
    _three_orgs(fleet, n=1)
    run = invoice_run_request(actor=None, period="2026-02")
    Operation.objects.filter(pk=run.operation_id).update(deadline_at=dt.datetime(2020, 1, 1, tzinfo=dt.UTC))
    assert drive(run.operation_id).error_code == "deadline_exceeded"
    run.refresh_from_db()
    assert run.status == "failed" and run.error.startswith("deadline_exceeded") and run.finished_at
    assert not Invoice.objects.exists()
    assert drive(invoice_run_request(actor=None, period="2026-02").operation_id).status == "succeeded"


@pytest.mark.parametrize("period", ["2026-13", "0000-01", "9999-12", "1969-12"])
def test_bad_period_writes_nothing(period):
    with pytest.raises(ValidationFailed) as exc:
        invoice_run_request(actor=None, period=period)
    assert exc.value.code == "invalid_period"
    assert not InvoiceRun.objects.exists() and not Operation.objects.exists()


@pytest.mark.parametrize("period", ["0000-01", "9999-12"])
def test_out_of_range_year_is_a_400_through_the_api(billing_client, period):
    resp = billing_client.post("/api/v1/invoice-runs", {"period": period}, format="json")
    assert resp.status_code == 400 and resp.json()["code"] == "invalid_period"
    assert not InvoiceRun.objects.exists() and not Operation.objects.exists()


def test_a_run_for_a_month_not_started_or_a_finalizing_run_before_its_end_is_a_409(tiers, fleet, billing_client):
    """An invoice run names a month that has started: a draft of a month ahead would take the organization's
    pending SLA credits from its real next invoice. 409 `period_not_started` with the month's UTC start (as
    `period_not_ended` answers a finalize before the end), nothing written; a finalizing run for the month in
    progress is 409 `period_not_ended`; re-rating a window that reaches into a month not started is refused too."""
    _three_orgs(fleet, n=1)
    with time_machine.travel(dt.datetime(2027, 1, 15, 12, tzinfo=dt.UTC), tick=False):
        far = billing_client.post("/api/v1/invoice-runs", {"period": "2099-12", "finalize": False}, format="json")
        assert far.status_code == 409 and far["Content-Type"] == "application/problem+json"
        assert (far.json()["code"], far.json()["period_start"]) == ("period_not_started", "2099-12-01T00:00:00+00:00")
        nxt = billing_client.post("/api/v1/invoice-runs", {"period": "2027-02", "finalize": True}, format="json")
        assert (nxt.status_code, nxt.json()["code"]) == (409, "period_not_started")
        now = billing_client.post("/api/v1/invoice-runs", {"period": "2027-01", "finalize": True}, format="json")
        assert (now.status_code, now.json()["code"], now.json()["period_end"]) == (
            409, "period_not_ended", "2027-02-01T00:00:00+00:00")
        with pytest.raises(Conflict) as exc:
            invoicing.invoice_run_execute(period="2027-02", finalize=False)
        assert exc.value.code == "period_not_started"
        rerate = billing_client.post("/api/v1/billing/rerate/", {"start": "2027-01-31T00:00:00Z",
                                                                 "end": "2027-02-01T01:00:00Z"}, format="json")
        assert (rerate.status_code, rerate.json()["code"]) == (409, "period_not_started")
        assert not InvoiceRun.objects.exists() and not Operation.objects.exists() and not Invoice.objects.exists()
        preview = billing_client.post("/api/v1/invoice-runs", {"period": "2027-01", "finalize": False}, format="json")
        assert preview.status_code == 202  # the month in progress is drafted as a running preview


def test_a_run_for_a_month_before_the_first_price_book_is_a_400_on_the_period(tiers, fleet, billing_client):
    """"1999-01" (a typo for a month of the price books' era): 400 `period_too_early` on `period` naming the first
    price book's month, nothing written; the month the first book starts in is invoiced. The refusal to finalize
    the month in progress says its end in words and to untick Finalize, not a raw ISO timestamp."""
    from apps.billing.models import PriceBook

    _three_orgs(fleet, n=1)
    first = PriceBook.objects.order_by("effective_from").first().effective_from
    month = f"{first.year:04d}-{first.month:02d}"
    with time_machine.travel(dt.datetime(2026, 12, 5, 12, tzinfo=dt.UTC), tick=False):
        early = billing_client.post("/api/v1/invoice-runs", {"period": "1999-01", "finalize": False}, format="json")
        assert (early.status_code, early["Content-Type"], early.json()["code"]) == (
            400, "application/problem+json", "period_too_early")
        assert early.json()["errors"] == {"period": [f"before the first price book ({month})"]}
        assert early.json()["first_price_book_start"] == first.isoformat()
        assert not InvoiceRun.objects.exists() and not Operation.objects.exists()
        assert billing_client.post("/api/v1/invoice-runs", {"period": month, "finalize": False},
                                   format="json").status_code == 202
        now = billing_client.post("/api/v1/invoice-runs", {"period": "2026-12", "finalize": True}, format="json")
    assert (now.status_code, now.json()["code"], now.json()["period_end"]) == (
        409, "period_not_ended", "2027-01-01T00:00:00+00:00")
    assert now.json()["detail"] == (
        "The month 2026-12 ends on 2027-01-01 00:00 UTC; invoices are finalized once their month has ended. To "
        "refresh the drafts of the month in progress now, untick Finalize (a run with `finalize` false).")
