"""Authorization-matrix entries of the billing app.

Tenant reads: usage and SLA reports follow project visibility; invoices and credit notes are for organization
owners, admins and billing members (so `viewer` and `member` get 404 on one invoice). Staff endpoints: any staff
reads, only billing admins write, tenants get 404 (as for what they may not see) — the matrix's staff caller is an
operator, so every billing write is 403 for it
(the billing-admin path is tested in tests/billing/test_api.py)."""
import datetime as dt
from decimal import Decimal

from apps.billing.models import (
    Adjustment,
    BillingAccount,
    CreditNote,
    Invoice,
    InvoiceLine,
    InvoiceRun,
    Price,
    PriceBook,
    SlaReport,
    SlaTier,
    TaxRate,
    UsageRecord,
)

from .framework import Case, Entry, expect

UTC = dt.UTC
STAFF_ONLY = expect(other_org=404, viewer=404, member=404, admin=404, read_token=404, staff=200)
DENIED = expect(other_org=404, viewer=404, member=404, admin=404, read_token=404, staff=403)
LIST = expect(other_org=200)
BILLING_READ = expect(viewer=404, member=404)


def _usage(world) -> UsageRecord:
    return UsageRecord.objects.create(
        organization=world.org_a, project=world.project_a, resource_type="instance", resource_id="vm-1",
        sku="gpu:gpu_count=1,model=H100", pricing_model="on_demand", sla_tier="standard",
        start=dt.datetime(2026, 1, 1, tzinfo=UTC), end=dt.datetime(2026, 1, 1, 1, tzinfo=UTC), run_id="r1",
        source="authz", source_key=f"authz:{world.org_a.pk}")


def _invoice(world, status="finalized") -> Invoice:
    number = None if status == "draft" else 900000 + Invoice.objects.count()
    return Invoice.objects.create(
        organization=world.org_a, period="2026-01", period_start=dt.datetime(2026, 1, 1, tzinfo=UTC),
        period_end=dt.datetime(2026, 2, 1, tzinfo=UTC), timezone="UTC", currency="USD", status=status,
        number=number, subtotal=Decimal("10.00"), total=Decimal("10.00"))


def _invoice_with_line(world) -> Invoice:
    """A finalized invoice with one usage line (what `/usage/?invoice_line=` filters by)."""
    invoice = _invoice(world)
    InvoiceLine.objects.create(invoice=invoice, kind="usage", project=world.project_a, resource_type="instance",
                               resource_id="vm-1", sku="gpu:gpu_count=1,model=H100", pricing_model="on_demand",
                               sla_tier="standard", description="authz line", amount=Decimal("10.00"))
    return invoice


def _credit_note(world) -> CreditNote:
    invoice = _invoice(world)
    return CreditNote.objects.create(invoice=invoice, organization=world.org_a, number=900000, currency="USD",
                                     amount=Decimal("1.00"), tax=Decimal("0"), total=Decimal("1.00"), reason="x")


def _sla_report(world) -> SlaReport:
    return SlaReport.objects.create(
        organization=world.org_a, project=world.project_a, resource_type="instance", resource_id="vm-1",
        sla_tier="standard", period="2026-01", held_minutes=100, downtime_minutes=1, uptime_pct=99,
        target_uptime_pct=99, credit_pct=0, billed_amount=Decimal("1"), credit_amount=Decimal("0"), currency="USD",
        source_invoice=_invoice(world))


def _tier(world) -> SlaTier:
    return SlaTier.objects.get_or_create(code="standard", defaults={
        "name": "Standard", "target_uptime_pct": 99, "support_response_minutes": 480,
        "credit_schedule": [{"below": "99.0", "credit_pct": "10"}]})[0]


def _book(world) -> PriceBook:
    return PriceBook.objects.get_or_create(name="authz", currency="USD",
                                           effective_from=dt.datetime(2030, 1, 1, tzinfo=UTC))[0]


def _price(world) -> Price:
    return Price.objects.create(book=_book(world), sku="public_ip", sla_tier="standard", pricing_model="on_demand",
                                unit_price=Decimal("0.005"))


def _own_price(world) -> Price:
    world.org_a.currency = "CHF"
    world.org_a.save(update_fields=["currency"])
    book = PriceBook.objects.create(name="authz-chf", currency="CHF", effective_from=dt.datetime(2020, 1, 1,
                                                                                                 tzinfo=UTC))
    return Price.objects.create(book=book, sku="public_ip", sla_tier=world.org_a.default_sla_tier,
                                pricing_model="on_demand", unit_price=Decimal("0.004"))


def pk(factory, data=None):
    return lambda world: Case(kwargs={"pk": factory(world).pk}, data=data)


def _incident(world) -> Case:
    from apps.inventory.models import Incident
    from tests.scheduling import fleet

    host = fleet.host(gpus=1)
    return Case(kwargs={"pk": Incident.objects.create(host=host, start=host.created_at, reason="authz").pk})


ENTRIES = [
    Entry("GET", "/api/v1/incidents/{pk}/impact", STAFF_ONLY, _incident),
    Entry("GET", "/api/v1/usage", LIST, lambda w: (_usage(w), Case())[1]),
    Entry("GET", "/api/v1/usage/{pk}", expect(), pk(_usage)),
    Entry("GET", "/api/v1/invoices", LIST, lambda w: (_invoice_with_line(w), Case())[1]),
    # month to date of an organization whose bills the caller reads; any other is `Not found.` (400), as for an
    # organization that does not exist
    Entry("GET", "/api/v1/invoices/preview", expect(other_org=400, viewer=400, member=400),
          lambda w: Case(query={"organization": str(w.org_a.pk)})),
    Entry("GET", "/api/v1/invoices/{pk}", BILLING_READ, pk(_invoice)),
    Entry("GET", "/api/v1/invoices/{pk}/csv", BILLING_READ, pk(_invoice)),
    Entry("GET", "/api/v1/invoices/{pk}/pdf", BILLING_READ, pk(_invoice)),
    Entry("POST", "/api/v1/invoices/{pk}/finalize", DENIED, pk(lambda w: _invoice(w, "draft"))),
    Entry("POST", "/api/v1/invoices/{pk}/pay", DENIED, pk(_invoice, {"amount": "10.00"})),
    Entry("POST", "/api/v1/invoices/{pk}/void", DENIED, pk(_invoice, {"reason": "wrong"})),
    Entry("GET", "/api/v1/credit-notes", LIST, lambda w: (_credit_note(w), Case())[1]),
    Entry("GET", "/api/v1/credit-notes/{pk}", BILLING_READ, pk(_credit_note)),
    Entry("GET", "/api/v1/credit-notes/{pk}/csv", BILLING_READ, pk(_credit_note)),
    Entry("GET", "/api/v1/credit-notes/{pk}/pdf", BILLING_READ, pk(_credit_note)),
    Entry("POST", "/api/v1/credit-notes", DENIED,
          lambda w: Case(data={"invoice": str(_invoice(w).pk), "amount": "1.00", "reason": "goodwill"})),
    Entry("GET", "/api/v1/sla-reports", LIST, lambda w: (_sla_report(w), Case())[1]),
    Entry("GET", "/api/v1/sla-reports/{pk}", expect(), pk(_sla_report)),
    Entry("GET", "/api/v1/sla-tiers", LIST),
    Entry("POST", "/api/v1/sla-tiers", DENIED,
          lambda w: Case(data={"code": "gold", "name": "Gold", "target_uptime_pct": "99.95",
                               "credit_schedule": [{"below": "99.95", "credit_pct": "10"}],
                               "support_response_minutes": 15})),
    Entry("PATCH", "/api/v1/sla-tiers/{pk}", DENIED, pk(_tier, {"name": "Renamed"})),
    Entry("GET", "/api/v1/price-books", STAFF_ONLY),
    Entry("POST", "/api/v1/price-books", DENIED,
          lambda w: Case(data={"name": "2031", "currency": "USD", "effective_from": "2031-01-01T00:00:00Z"})),
    Entry("GET", "/api/v1/price-books/{pk}", STAFF_ONLY, pk(_book)),
    Entry("POST", "/api/v1/price-books/{pk}/prices", DENIED,
          pk(_book, {"sku": "public_ip", "sla_tier": "standard", "pricing_model": "on_demand",
                     "unit_price": "0.005"})),
    # a tenant reads the price list of its own currency and tier, any role, read scope enough: organization A
    # is billed in CHF here, so organization B (USD) finds A's price exactly like a missing one
    Entry("GET", "/api/v1/prices", LIST),
    Entry("GET", "/api/v1/prices/{pk}", expect(), pk(_own_price)),
    Entry("GET", "/api/v1/invoice-runs", STAFF_ONLY),
    Entry("GET", "/api/v1/invoice-runs/{pk}", STAFF_ONLY, pk(lambda w: InvoiceRun.objects.create(period="2026-01"))),
    Entry("POST", "/api/v1/invoice-runs", DENIED, lambda w: Case(data={"period": "2026-01"})),
    Entry("GET", "/api/v1/adjustments", STAFF_ONLY),
    Entry("GET", "/api/v1/adjustments/{pk}", STAFF_ONLY, pk(lambda w: Adjustment.objects.create(
        organization=w.org_a, period="2026-01", amount=Decimal("5.00"), description="x"))),
    Entry("DELETE", "/api/v1/adjustments/{pk}", DENIED, pk(lambda w: Adjustment.objects.create(
        organization=w.org_a, period="2026-01", amount=Decimal("5.00"), description="x"))),
    Entry("POST", "/api/v1/adjustments", DENIED,
          lambda w: Case(data={"organization": str(w.org_a.pk), "period": "2026-01", "amount": "5.00",
                               "description": "goodwill"})),
    Entry("GET", "/api/v1/billing-accounts", STAFF_ONLY),
    Entry("GET", "/api/v1/billing-accounts/{pk}", STAFF_ONLY,
          pk(lambda w: BillingAccount.objects.create(organization=w.org_a, tax_rate=Decimal("0.19")))),
    Entry("POST", "/api/v1/billing-accounts", DENIED,
          lambda w: Case(data={"organization": str(w.org_a.pk), "tax_rate": "0.2"})),
    Entry("GET", "/api/v1/tax-rates", STAFF_ONLY),
    Entry("GET", "/api/v1/tax-rates/{pk}", STAFF_ONLY, pk(lambda w: TaxRate.objects.create(
        country="DE", name="VAT", rate=Decimal("19"), effective_from=dt.date(2021, 1, 1)))),
    Entry("POST", "/api/v1/tax-rates", DENIED,
          lambda w: Case(data={"country": "FR", "name": "VAT", "rate": "20", "effective_from": "2014-01-01"})),
    Entry("POST", "/api/v1/billing/rerate", DENIED,
          lambda w: Case(data={"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T01:00:00Z"})),
    Entry("GET", "/api/v1/billing/reports/revenue", STAFF_ONLY,
          lambda w: Case(query={"period_from": "2026-01", "period_to": "2026-12"})),
    Entry("GET", "/api/v1/billing/reports/utilization", STAFF_ONLY,
          lambda w: Case(query={"since": "2026-01-01T00:00:00Z", "until": "2026-02-01T00:00:00Z"})),
]
