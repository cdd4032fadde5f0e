"""Publishing a new version of the price list in one request (`POST /price-books/` with its `prices`): the book
and its prices are created together or not at all, and a refusal names the field it is about (what the admin
portal's price-book form shows beside the field). The clock stands in mid-April 2026: a version for May is in the
future, one for March is not."""
import pytest
import time_machine

from apps.billing.models import Price, PriceBook
from apps.identity.models import StaffRole
from tests.tenancy.helpers import client_for, make_user, token_for

from .conftest import H100, book, utc

pytestmark = pytest.mark.django_db



@pytest.fixture(autouse=True)
def mid_april():
    with time_machine.travel(utc(2026, 4, 15), tick=False):
        yield


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
    body = {"name": "may", "currency": "USD", "effective_from": "2026-05-01T00:00:00Z", "prices": [PRICE]}
    assert admin.post("/api/v1/price-books/", body, format="json").status_code == 201
    r = admin.post("/api/v1/price-books/", {**body, "name": "again"}, format="json")
    assert (r.status_code, r.json()["code"]) == (409, "price_book_exists")
    assert r.json()["errors"]["effective_from"] == ["A USD price book already starts at 2026-05-01T00:00:00Z."]
    assert PriceBook.objects.filter(currency="USD").count() == 2


@pytest.mark.parametrize("start", ["2020-06-01T00:00:00Z", "2026-03-01T00:00:00Z", "2026-04-15T00:00:00Z"])
def test_a_new_version_starting_now_or_in_the_past_is_refused_on_the_field(admin, start):
    """A start at or before now would re-price usage already rated on draft invoices: refused, nothing made."""
    r = admin.post("/api/v1/price-books/", {"name": "back", "currency": "USD", "effective_from": start,
                                            "prices": [PRICE]}, format="json")
    assert (r.status_code, r.json()["code"]) == (400, "price_book_backdated")
    assert list(r.json()["errors"]) == ["effective_from"]
    assert not PriceBook.objects.filter(name="back").exists() and not Price.objects.filter(unit_price="2.5").exists()


def test_the_first_book_of_a_currency_may_start_in_the_past(admin):
    """Nothing in euros had a price: the first EUR book may price usage from before it was published."""
    r = admin.post("/api/v1/price-books/", {"name": "eur", "currency": "EUR", "effective_from": "2026-01-01T00:00:00Z"},
                   format="json")
    assert r.status_code == 201, r.content


def test_a_malformed_start_is_refused_on_the_field(admin):
    r = admin.post("/api/v1/price-books/", {"name": "x", "currency": "USD", "effective_from": "next month"},
                   format="json")
    assert r.status_code == 400 and "effective_from" in r.json()["errors"]
    assert PriceBook.objects.count() == 1
