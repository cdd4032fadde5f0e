"""The staff roles against the admin portal's endpoints: what each role may read and change, as the server
decides it (the console only mirrors it). Operators run the fleet, billing admins run billing, support reads
everything and changes nothing; a tenant (here an organization owner, the strongest tenant role) gets 404
`not_found` from every one of them, as for an object it may not see (docs/admin-portal.md, "Staff roles").
Every refused change leaves the host, the books, the runs and the invoice as they were."""
import datetime as dt
from decimal import Decimal

import pytest

from apps.billing.models import CreditNote, Invoice, InvoiceRun, PriceBook
from apps.inventory.models import Host
from apps.tenancy.models import OrgRole
from tests.tenancy.helpers import client_for, make_org, make_user, member, token_for

from .matrix_inventory import make_host

pytestmark = pytest.mark.django_db
UTC = dt.UTC
ROLES = ("operator", "billing_admin", "support", "tenant")


@pytest.fixture
def world(db):
    org = make_org("acme")
    owner = make_user("owner@acme.test")
    member(owner, org, OrgRole.OWNER)
    clients = {role: client_for(token_for(make_user(f"{role}@provider.test", staff_role=role), staff=True))
               for role in ROLES[:3]}
    clients["tenant"] = client_for(token_for(owner, organization=org))
    host = make_host("roles-h1", gpus=1)
    invoice = Invoice.objects.create(
        organization=org, period="2026-01", period_start=dt.datetime(2026, 1, 1, tzinfo=UTC),
        period_end=dt.datetime(2026, 2, 1, tzinfo=UTC), timezone="UTC", currency="USD", status="draft",
        subtotal=Decimal("10.00"), total=Decimal("10.00"))
    finalized = Invoice.objects.create(
        organization=org, period="2025-12", period_start=dt.datetime(2025, 12, 1, tzinfo=UTC),
        period_end=dt.datetime(2026, 1, 1, tzinfo=UTC), timezone="UTC", currency="USD", status="finalized",
        number=990001, subtotal=Decimal("10.00"), total=Decimal("10.00"))
    return {"clients": clients, "host": host, "invoice": invoice, "finalized": finalized}


def _state(w):
    return (Host.objects.get(pk=w["host"].pk).state, PriceBook.objects.count(), InvoiceRun.objects.count(),
            Invoice.objects.get(pk=w["invoice"].pk).status, CreditNote.objects.count())


READS = ["fleet/summary/", "hosts/", "hosts/{host}/", "gpus/", "price-books/", "prices/", "invoice-runs/",
         "invoices/{invoice}/", "credit-notes/", "sla-tiers/", "audit-events/export/", "health/events/"]


@pytest.mark.parametrize("role", ROLES)
def test_every_staff_role_reads_the_portal_and_a_tenant_finds_nothing(world, role):
    client = world["clients"][role]
    for path in READS:
        path = path.format(host=world["host"].pk, invoice=world["invoice"].pk)
        r = client.get(f"/api/v1/{path}")
        if role == "tenant" and path.startswith(("invoices/", "prices/", "credit-notes/", "sla-tiers/")):
            # tenant endpoints: its own bills and price list; a draft is staff-only, so the tenant's is a 404
            assert r.status_code == (404 if path.startswith("invoices/") else 200), (path, r.content[:200])
        elif role == "tenant":
            assert (r.status_code, r.json()["code"]) == (404, "not_found"), path
        else:
            assert r.status_code == 200, (role, path, r.content[:200])


# (method, path, body, the role that may, what it answers)
WRITES = [
    ("post", "hosts/{host}/drain/", {"reason": "r"}, "operator", 200),
    ("post", "hosts/{host}/cordon/", {"reason": "r"}, "operator", 200),
    ("post", "price-books/", {"name": "v2", "currency": "USD", "effective_from": "2027-01-01T00:00:00Z"},
     "billing_admin", 201),
    ("post", "invoice-runs/", {"period": "2026-01", "finalize": False}, "billing_admin", 202),
    ("post", "credit-notes/", {"invoice": "{finalized}", "amount": "1.00", "reason": "goodwill"}, "billing_admin", 201),
]


@pytest.mark.parametrize("method,path,body,allowed,ok", WRITES, ids=[w[1] for w in WRITES])
@pytest.mark.parametrize("role", ROLES)
def test_only_the_role_that_owns_a_change_may_make_it(world, role, method, path, body, allowed, ok):
    client = world["clients"][role]
    path = path.format(host=world["host"].pk)
    body = {k: (str(world["finalized"].pk) if v == "{finalized}" else v) for k, v in body.items()}
    before = _state(world)
    r = getattr(client, method)(f"/api/v1/{path}", body, format="json")
    if role == allowed:
        assert r.status_code == ok, r.content[:300]
        return
    expected = (404, "not_found") if role == "tenant" else (403, "permission_denied")
    assert (r.status_code, r.json()["code"]) == expected, (role, path)
    assert _state(world) == before


@pytest.mark.parametrize("role", ROLES)
def test_finalize_is_the_billing_admins(world, role):
    r = world["clients"][role].post(f"/api/v1/invoices/{world['invoice'].pk}/finalize/", {}, format="json")
    if role == "billing_admin":
        assert r.status_code != 403 and r.status_code != 404   # allowed (the draft's rating decides the rest)
    else:
        assert (r.status_code, r.json()["code"]) == ((404, "not_found") if role == "tenant"
                                                     else (403, "permission_denied"))
        assert Invoice.objects.get(pk=world["invoice"].pk).status == "draft"


def test_the_host_panel_offers_each_role_only_its_actions(world):
    """`allowed_actions` (what the console's host panel shows): an operator's transitions, none for the others."""
    path = f"/api/v1/hosts/{world['host'].pk}/"
    assert "drain" in world["clients"]["operator"].get(path).json()["allowed_actions"]
    for role in ("billing_admin", "support"):
        assert world["clients"][role].get(path).json()["allowed_actions"] == []
