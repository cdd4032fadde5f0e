"""Publishing a new version of the price list in one request (`POST /price-books/` with its `prices`): the book
and its prices are created together or not at all, and a refusal names the field it is about (what the admin
portal's price-book form shows beside the field)."""
import pytest

from apps.billing.models import Price, PriceBook
from apps.identity.models import StaffRole
from tests.tenancy.helpers import client_for, make_user, token_for

from .conftest import H100, book, utc

pytestmark = pytest.mark.django_db

PRICE = {"sku": H100, "sla_tier": "standard", "pricing_model": "on_demand", "unit_price": "2.50"}


@pytest.fixture
def admin(tiers):
    book(utc(2026, 1, 1), {(H100, "standard", "on_demand"): "2.00"})
    return client_for(token_for(make_user("ba@provider.test", staff_role=StaffRole.BILLING_ADMIN), staff=True))


def test_a_version_is_published_with_its_prices(admin):
    r = admin.post("/api/v1/price-books/", {"name": "2026-05", "currency": "USD",
                                            "effective_from": "2026-05-01T00:00:00Z", "prices": [PRICE]}, format="json")
    assert r.status_code == 201, r.content
    assert [(p["sku"], p["unit_price"]) for p in r.json()["prices"]] == [(H100, "2.500000")]
    assert Price.objects.filter(book_id=r.json()["id"]).count() == 1


def test_a_refused_price_leaves_no_book(admin):
    r = admin.post("/api/v1/price-books/", {"name": "2026-05", "currency": "USD",
                                            "effective_from": "2026-05-01T00:00:00Z",
                                            "prices": [PRICE, {**PRICE, "sku": "public_ip", "sla_tier": "gold"}]},
                   format="json")
    assert (r.status_code, r.json()["code"]) == (400, "unknown_sla_tier")
    assert "prices.1.sla_tier" in r.json()["errors"]
    assert not PriceBook.objects.filter(name="2026-05").exists()
    assert not Price.objects.filter(sku="public_ip").exists()


def test_a_second_book_at_the_same_start_is_refused_on_the_field(admin):
    r = admin.post("/api/v1/price-books/", {"name": "again", "currency": "USD",
                                            "effective_from": "2026-01-01T00:00:00Z", "prices": [PRICE]}, format="json")
    assert (r.status_code, r.json()["code"]) == (409, "price_book_exists")
    assert r.json()["errors"]["effective_from"] == ["A USD price book already starts at 2026-01-01T00:00:00Z."]
    assert PriceBook.objects.filter(currency="USD").count() == 1


def test_a_malformed_start_is_refused_on_the_field(admin):
    r = admin.post("/api/v1/price-books/", {"name": "x", "currency": "USD", "effective_from": "next month"},
                   format="json")
    assert r.status_code == 400 and "effective_from" in r.json()["errors"]
    assert PriceBook.objects.count() == 1
