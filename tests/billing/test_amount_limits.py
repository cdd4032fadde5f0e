"""Amounts the API accepts are bounded by what rating stores (400 `amount_out_of_range`, one validator for
adjustments, credit notes, payments and prices); a run step that meets bad data fails its operation with a code
instead of retrying forever; staff delete an adjustment of an open period."""
from decimal import Decimal

import pytest

from apps.billing.models import Adjustment, Invoice, InvoiceRun
from apps.billing.money import AMOUNT_LIMIT
from apps.billing.services import invoice_run_request
from apps.billing.states import RunStatus
from apps.identity.models import StaffRole
from apps.operations.models import Operation
from tests.operations.helpers import drive
from tests.tenancy.helpers import client_for, make_user, token_for

from .conftest import H100, book, make_org, utc
from .test_api import billed  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db
HUGE = "99999999999999.99"


@pytest.fixture
def admin():
    return client_for(token_for(make_user("ba@provider.test", staff_role=StaffRole.BILLING_ADMIN), staff=True))


def _problem(resp, code="amount_out_of_range", field="amount"):
    assert resp.status_code == 400, resp.content
    body = resp.json()
    assert body["code"] == code and field in body["errors"], body
    return body


def test_adjustment_credit_note_payment_and_price_over_the_limit_are_400(billed, admin):  # noqa: F811
    acme, _, _ = billed
    resp = admin.post("/api/v1/adjustments/", {"organization": str(acme.pk), "period": "2026-12", "amount": HUGE,
                                               "description": "typo"}, format="json")
    assert _problem(resp)["limit"] == str(AMOUNT_LIMIT)
    assert not Adjustment.objects.exists()
    negative = admin.post("/api/v1/adjustments/", {"organization": str(acme.pk), "period": "2026-12",
                                                   "amount": "-" + HUGE, "description": "typo"}, format="json")
    _problem(negative)
    invoice = Invoice.objects.get(organization=acme)
    _problem(admin.post("/api/v1/credit-notes/", {"invoice": str(invoice.pk), "amount": HUGE, "reason": "x"},
                        format="json"))
    _problem(admin.post(f"/api/v1/invoices/{invoice.pk}/pay/", {"amount": HUGE}, format="json"))
    price_book = book(utc(2027, 1, 1), {})
    _problem(admin.post(f"/api/v1/price-books/{price_book.pk}/prices/",
                        {"sku": H100, "sla_tier": "standard", "pricing_model": "on_demand",
                         "unit_price": "9999999999.000001"}, format="json"), field="unit_price")
    at_limit = admin.post("/api/v1/adjustments/", {"organization": str(acme.pk), "period": "2026-12",
                                                   "amount": str(AMOUNT_LIMIT), "description": "big"}, format="json")
    assert at_limit.status_code == 201, at_limit.content


def test_a_run_step_that_overflows_fails_the_operation_and_frees_the_period(tiers, admin):
    acme, _ = make_org("acme")
    # stored past the API's bound (as before the bound existed): rating cannot hold it
    bad = Adjustment.objects.create(organization=acme, period="2026-02", amount=Decimal(HUGE), description="typo")
    run = invoice_run_request(actor=None, period="2026-02")
    op = drive(run.operation_id)
    assert (op.status, op.error_code, op.step) == ("failed", "database_error", "invoice")
    assert "DataError" in op.error_detail
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.error.startswith("database_error")
    # the period is free again: staff remove the adjustment and run it
    assert admin.delete(f"/api/v1/adjustments/{bad.pk}/").status_code == 204
    again = admin.post("/api/v1/invoice-runs/", {"period": "2026-02"}, format="json")
    assert again.status_code == 202, again.content
    assert drive(again.json()["operation"]).status == "succeeded"
    assert InvoiceRun.objects.get(pk=again.json()["id"]).status == RunStatus.COMPLETED


def test_staff_delete_an_adjustment_of_an_open_period_not_of_an_invoiced_one(billed, admin):  # noqa: F811
    acme, _, _ = billed
    open_one = admin.post("/api/v1/adjustments/", {"organization": str(acme.pk), "period": "2026-03",
                                                   "amount": "5.00", "description": "fee"}, format="json").json()
    op = drive(admin.post("/api/v1/invoice-runs/", {"period": "2026-03", "finalize": False},
                          format="json").json()["operation"])
    assert op.status == "succeeded"
    draft = Invoice.objects.get(organization=acme, period="2026-03")
    assert draft.lines.filter(kind="adjustment").count() == 1
    assert admin.delete(f"/api/v1/adjustments/{open_one['id']}/").status_code == 204
    assert not Adjustment.objects.filter(pk=open_one["id"]).exists()
    assert not draft.lines.filter(kind="adjustment").exists()
    closed = Adjustment.objects.create(organization=acme, period="2026-02", amount=Decimal("1.00"),
                                       description="late")  # February is finalized
    resp = admin.delete(f"/api/v1/adjustments/{closed.pk}/")
    assert resp.status_code == 409 and resp.json()["code"] == "period_closed"
    assert Adjustment.objects.filter(pk=closed.pk).exists()
    assert Operation.objects.filter(status="failed").count() == 0
