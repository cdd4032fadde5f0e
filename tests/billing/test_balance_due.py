"""`balance_due` = total − credit notes − payment: 0 once paid, negative (credit owed) for a credit note on a paid
invoice; in the API and the PDF."""
from decimal import Decimal

import pytest

from apps.billing import exports
from apps.billing.models import Invoice
from apps.identity.models import StaffRole
from tests.tenancy.helpers import client_for, make_user, token_for

from .conftest import pdf_text
from .test_api import billed  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


def test_paying_in_full_leaves_nothing_due_and_a_later_credit_note_is_owed(billed):  # noqa: F811
    acme, _, _ = billed
    admin = client_for(token_for(make_user("ba@provider.test", staff_role=StaffRole.BILLING_ADMIN), staff=True))
    invoice = Invoice.objects.get(organization=acme)  # finalized, $12.00
    note = admin.post("/api/v1/credit-notes/", {"invoice": str(invoice.pk), "amount": "2.00", "reason": "x"},
                      format="json")
    assert note.status_code == 201, note.content
    assert admin.get(f"/api/v1/invoices/{invoice.pk}/").json()["balance_due"] == "10.00"
    paid = admin.post(f"/api/v1/invoices/{invoice.pk}/pay/", {"amount": "10.00"}, format="json")
    assert paid.status_code == 200, paid.content
    assert (paid.json()["amount_paid"], paid.json()["balance_due"]) == ("10.00", "0.00")
    later = admin.post("/api/v1/credit-notes/", {"invoice": str(invoice.pk), "amount": "3.00", "reason": "late"},
                       format="json")
    assert later.status_code == 201, later.content
    body = admin.get(f"/api/v1/invoices/{invoice.pk}/").json()
    assert (body["credited"], body["amount_paid"], body["balance_due"]) == ("5.00", "10.00", "-3.00")
    invoice.refresh_from_db()
    assert invoice.balance_due == Decimal("-3.00")
    pdf = pdf_text(exports.invoice_pdf(invoice))
    for text in (f"Paid {invoice.paid_at:%Y-%m-%d}: -10.00 USD", "Balance due: -3.00 USD"):
        assert text in pdf, text
