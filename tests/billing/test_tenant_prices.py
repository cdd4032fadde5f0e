"""The tenant catalog: regions and zones for any authenticated caller; `/prices` shows a tenant the price list
that applies to its organization (its currency and default SLA tier, the prices in force now), never another
customer's (docs/adr/0603-tenant-price-list.md)."""
import uuid

import pytest
import time_machine

from apps.compute.models import Flavor
from apps.identity.models import StaffRole
from apps.inventory.models import Region, Zone
from apps.tenancy.models import OrgRole
from tests.tenancy.helpers import client_for, make_user, member, token_for

from .conftest import book, make_org, utc

pytestmark = pytest.mark.django_db
ON_DEMAND = "on_demand"


@pytest.fixture
def catalog(tiers):
    """acme (USD, standard) and beta (EUR, premium, a book of its own); a USD book superseded by a newer one and
    a USD book not yet in force."""
    acme, _ = make_org("acme")
    beta, _ = make_org("beta", currency="EUR", tier="premium")
    Flavor.objects.create(name="h100x1", vcpus=8, memory_mib=65536, gpu_form="gpu", gpu_model="H100", gpu_count=1)
    book(utc(2026, 1, 1), {("flavor:name=h100x1", "standard", ON_DEMAND): "3.00",
                           ("public_ip", "standard", ON_DEMAND): "0.01",
                           ("flavor:name=h100x1", "premium", ON_DEMAND): "3.50"}, name="list 2026")
    book(utc(2026, 6, 1), {("flavor:name=h100x1", "standard", ON_DEMAND): "2.50"}, name="list mid-2026")
    book(utc(2027, 1, 1), {("flavor:name=h100x1", "standard", ON_DEMAND): "2.00"}, name="list 2027")
    beta_book = book(utc(2026, 1, 1), {("flavor:name=h100x1", "premium", ON_DEMAND): "2.20"}, currency="EUR",
                     name="beta contract")
    owner, other = make_user("owner@acme.test"), make_user("owner@beta.test")
    member(owner, acme, OrgRole.VIEWER)
    member(other, beta, OrgRole.OWNER)
    return {"acme": acme, "beta_org": beta, "beta_book": beta_book,
            "tenant": client_for(token_for(owner, scope="read", organization=acme)),
            "beta": client_for(token_for(other, organization=beta))}


def _rows(response):
    assert response.status_code == 200, response.content
    return {(p["sku"], p["currency"], p["sla_tier"]): p["unit_price"] for p in response.json()["results"]}


@time_machine.travel(utc(2026, 7, 1), tick=False)
def test_tenant_reads_the_prices_in_force_at_its_currency_and_tier(catalog):
    rows = _rows(catalog["tenant"].get("/api/v1/prices/"))
    assert rows == {("flavor:name=h100x1", "USD", "standard"): "2.500000",
                    ("public_ip", "USD", "standard"): "0.010000"}
    assert _rows(catalog["beta"].get("/api/v1/prices/")) == {("flavor:name=h100x1", "EUR", "premium"): "2.200000"}


@time_machine.travel(utc(2026, 7, 1), tick=False)
def test_another_customers_book_answers_like_a_random_id(catalog):
    tenant, beta_price = catalog["tenant"], catalog["beta_book"].prices.get()
    missing, hidden = (tenant.get(f"/api/v1/prices/{pk}/") for pk in (uuid.uuid4(), beta_price.pk))
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["detail"] == missing.json()["detail"]
    random_book, beta_book = (tenant.get("/api/v1/prices/", {"book": str(pk)})
                              for pk in (uuid.uuid4(), catalog["beta_book"].pk))
    assert beta_book.status_code == random_book.status_code == 400
    assert beta_book.json()["code"] == random_book.json()["code"]
    assert str(catalog["beta_book"].pk) not in beta_book.content.decode()


@time_machine.travel(utc(2026, 7, 1), tick=False)
def test_filters_by_flavor_and_resource(catalog):
    tenant = catalog["tenant"]
    flavor = Flavor.objects.get(name="h100x1")
    assert list(_rows(tenant.get("/api/v1/prices/", {"flavor": str(flavor.pk)}))) == [
        ("flavor:name=h100x1", "USD", "standard")]
    assert list(_rows(tenant.get("/api/v1/prices/", {"resource": "public_ip"}))) == [
        ("public_ip", "USD", "standard")]
    assert tenant.get("/api/v1/prices/", {"flavor": str(uuid.uuid4())}).status_code == 400


@time_machine.travel(utc(2026, 7, 1), tick=False)
def test_staff_see_every_price_and_tenants_cannot_write(catalog):
    staff = client_for(token_for(make_user("ops@provider.test", staff_role=StaffRole.BILLING_ADMIN), staff=True))
    assert len(staff.get("/api/v1/prices/").json()["results"]) == 6
    assert catalog["beta"].post(f"/api/v1/price-books/{catalog['beta_book'].pk}/prices/", {
        "sku": "public_ip", "sla_tier": "premium", "pricing_model": ON_DEMAND, "unit_price": "0"},
        format="json").status_code == 404
    assert catalog["beta"].post("/api/v1/prices/", {}, format="json").status_code in (403, 405)


def test_regions_and_zones_for_a_read_token(catalog):
    region = Region.objects.create(name="eu-west", description="Frankfurt")
    Zone.objects.create(region=region, name="eu-west-a")
    tenant = catalog["tenant"]
    regions = tenant.get("/api/v1/regions/").json()["results"]
    assert [(r["name"], r["description"]) for r in regions] == [("eu-west", "Frankfurt")]
    assert [(z["name"], z["region"]) for z in tenant.get("/api/v1/zones/").json()["results"]] == [
        ("eu-west-a", "eu-west")]
    assert tenant.get(f"/api/v1/regions/{region.pk}/").json()["name"] == "eu-west"
    assert client_for(None).get("/api/v1/regions/").status_code == 401
    assert tenant.post("/api/v1/regions/", {"name": "x"}, format="json").status_code in (403, 405)
