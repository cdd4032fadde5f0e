"""Input checks: a zero adjustment, a SKU with an attribute twice, an unknown tier on a price, a credit note of
zero (its field named) are 400 with stable codes; an invoice with credit notes is not voided (409)."""
import pytest

from apps.billing.models import Adjustment, Invoice
from apps.identity.models import StaffRole
from tests.tenancy.helpers import client_for, make_user, token_for

from .conftest import H100, book, utc
from .test_api import billed  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin():
    return client_for(token_for(make_user("ba@provider.test", staff_role=StaffRole.BILLING_ADMIN), staff=True))


def test_zero_adjustment_duplicate_sku_attribute_unknown_tier_and_zero_credit_note(billed, admin):  # noqa: F811
    acme, _, _ = billed
    for amount in ("0", "0.00", "-0.00"):
        resp = admin.post("/api/v1/adjustments/", {"organization": str(acme.pk), "period": "2026-12",
                                                   "amount": amount, "description": "nothing"}, format="json")
        assert (resp.status_code, resp.json()["code"]) == (400, "zero_amount"), resp.content
        assert "amount" in resp.json()["errors"]
    assert not Adjustment.objects.exists()
    price_book = book(utc(2027, 1, 1), {})
    url = f"/api/v1/price-books/{price_book.pk}/prices/"
    dup = admin.post(url, {"sku": "gpu:model=X,model=Y", "sla_tier": "standard", "pricing_model": "on_demand",
                           "unit_price": "1.00"}, format="json")
    assert (dup.status_code, dup.json()["code"]) == (400, "invalid_sku"), dup.content
    assert not price_book.prices.exists()
    tier = admin.post(url, {"sku": H100, "sla_tier": "platinum", "pricing_model": "on_demand",
                            "unit_price": "1.00"}, format="json")
    assert (tier.status_code, tier.json()["code"]) == (400, "unknown_sla_tier"), tier.content
    assert "sla_tier" in tier.json()["errors"]
    invoice = Invoice.objects.get(organization=acme)
    zero = admin.post("/api/v1/credit-notes/", {"invoice": str(invoice.pk), "amount": "0.00", "reason": "x"},
                      format="json")
    assert zero.status_code == 400 and "amount" in zero.json()["errors"], zero.content


def test_an_invoice_without_credit_notes_is_still_voided(billed, admin):  # noqa: F811
    acme, _, _ = billed
    invoice = Invoice.objects.get(organization=acme)
    resp = admin.post(f"/api/v1/invoices/{invoice.pk}/void/", {"reason": "wrong customer"}, format="json")
    assert (resp.status_code, resp.json()["status"]) == (200, "void"), resp.content


def test_staff_actions_on_a_missing_invoice_are_404_for_a_billing_admin_and_for_a_tenant(billed, admin):  # noqa: F811
    import uuid

    from tests.tenancy.helpers import member

    acme, _, beta = billed
    missing = uuid.uuid4()
    for action, body in (("finalize", {}), ("pay", {"amount": "1.00"})):
        assert admin.post(f"/api/v1/invoices/{missing}/{action}/", body, format="json").status_code == 404
    owner = make_user("owner@acme.test")
    member(owner, acme, "owner")
    tenant = client_for(token_for(owner, organization=acme))
    other = Invoice.objects.get(organization=beta)
    for target in (missing, other.pk):  # the role is checked first: nothing about the id is revealed
        assert tenant.post(f"/api/v1/invoices/{target}/finalize/", {}, format="json").status_code == 404
