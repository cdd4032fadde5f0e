"""Tax rates as data (docs/billing.md, "Tax"): the rate of the billing country in force on the period's last day,
reverse charge for a foreign buyer with a tax id, no rate → 0, the staff API and the YAML loader."""

import csv
import datetime as dt
import io
from decimal import Decimal
from io import StringIO

import pytest
import yaml
from django.core.management import call_command

from apps.billing.management.commands.billing_tax_rates_load import DEFAULT
from apps.billing.models import Invoice, TaxRate
from apps.billing.services import billing_account_update, invoice_run_execute, tax_rate_create
from apps.core.errors import Conflict, ValidationFailed
from apps.identity.models import StaffRole
from tests.tenancy.helpers import client_for, make_user, token_for

from .conftest import H100, book, collect, make_org, pdf_text, utc

pytestmark = pytest.mark.django_db


def _billed(fleet, slug, *, country="", tax_id="", region="", hours=10, period="2026-04", **account):
    """An EUR organization with `hours` of H100 at 100.00/h in `period` (1,000.00 EUR), invoiced."""
    org, project = make_org(slug, currency="EUR")
    billing_account_update(
        actor=None, organization=org, country=country, tax_id=tax_id, region=region, **account
    )
    year, month = map(int, period.split("-"))
    fleet.run(org, project, f"vm-{slug}", utc(year, month, 1), utc(year, month, 1, hours))
    collect(utc(year, month, 1), utc(year, month, 2))
    invoice_run_execute(period=period)
    return Invoice.objects.get(organization=org, period=period)


@pytest.fixture
def eur_book(tiers):
    book(utc(2020, 1, 1), {(H100, "standard", "on_demand"): "100.00"}, currency="EUR")


@pytest.fixture
def rates(db):
    tax_rate_create(
        actor=None,
        country="DE",
        name="VAT",
        rate=Decimal("16"),
        effective_from=dt.date(2020, 7, 1),
        effective_to=dt.date(2021, 1, 1),
    )
    tax_rate_create(
        actor=None, country="DE", name="VAT", rate=Decimal("19"), effective_from=dt.date(2021, 1, 1)
    )
    tax_rate_create(
        actor=None, country="US", name="Sales tax", rate=Decimal("0"), effective_from=dt.date(2000, 1, 1)
    )
    tax_rate_create(
        actor=None,
        country="US",
        region="US-WA",
        name="Sales tax",
        rate=Decimal("6.5"),
        effective_from=dt.date(2000, 1, 1),
    )


def test_de_customer_is_invoiced_at_19_percent(eur_book, rates, fleet, settings):
    settings.BILLING_SELLER_COUNTRY = "DE"
    invoice = _billed(fleet, "berlin", country="de")
    assert (invoice.tax_rate, invoice.reverse_charge) == (Decimal("0.19000"), False)
    assert (invoice.subtotal, invoice.tax, invoice.total) == (
        Decimal("1000.00"),
        Decimal("190.00"),
        Decimal("1190.00"),
    )
    assert [line.tax_amount for line in invoice.lines.all()] == [Decimal("190.00")]


def test_invoice_documents_name_the_tax_rate_applied(eur_book, rates, fleet, settings):
    """A finance team books the tax at its rate: the PDF's tax total and the CSV's tax row say which rate the
    invoice applied (19 % here, 6.5 % in Washington), and a reverse-charge invoice says so."""
    from apps.billing import exports

    settings.BILLING_SELLER_COUNTRY = "DE"
    berlin = _billed(fleet, "berlin", country="DE")
    assert "Tax (19 %): 190.00 EUR" in pdf_text(exports.invoice_pdf(berlin))
    tax_row = next(row for row in csv.reader(io.StringIO(exports.invoice_csv(berlin))) if row[2] == "tax")
    assert (tax_row[9], tax_row[13]) == ("Tax (19 %)", "190.00")
    seattle = _billed(fleet, "seattle", country="US", region="US-WA")
    assert "Tax (6.5 %): 65.00 EUR" in pdf_text(exports.invoice_pdf(seattle))
    reverse = _billed(fleet, "amsterdam", country="NL", tax_id="NL123456789B01")
    assert "Tax (0 %, reverse charge): 0.00 EUR" in pdf_text(exports.invoice_pdf(reverse))


def test_rate_in_force_on_the_periods_last_day(eur_book, rates, fleet):
    """December 2020 was billed at the temporary 16 %; the 19 % from 1 January applies from January on."""
    december = _billed(fleet, "dec", country="DE", period="2020-12")
    january = _billed(fleet, "jan", country="DE", period="2021-01")
    assert (december.tax_rate, december.tax) == (Decimal("0.16000"), Decimal("160.00"))
    assert (january.tax_rate, january.tax) == (Decimal("0.19000"), Decimal("190.00"))


def test_region_rate_wins_over_the_country_rate(eur_book, rates, fleet):
    assert _billed(fleet, "seattle", country="US", region="us-wa").tax == Decimal("65.00")
    assert _billed(fleet, "austin", country="US", region="US-TX").tax == Decimal("0.00")


def test_reverse_charge_for_a_foreign_buyer_with_a_tax_id(eur_book, rates, fleet, settings):
    settings.BILLING_SELLER_COUNTRY = "NL"
    invoice = _billed(fleet, "muenchen", country="DE", tax_id="DE123456789")
    assert (invoice.tax_rate, invoice.reverse_charge, invoice.tax, invoice.total) == (
        Decimal("0"),
        True,
        Decimal("0.00"),
        Decimal("1000.00"),
    )
    # the same buyer without a tax id (a consumer) pays its country's VAT; a domestic buyer with one pays it too
    assert _billed(fleet, "consumer", country="DE").tax == Decimal("190.00")
    settings.BILLING_SELLER_COUNTRY = "DE"
    domestic = _billed(fleet, "domestic", country="DE", tax_id="DE987654321")
    assert (domestic.reverse_charge, domestic.tax) == (False, Decimal("190.00"))

    admin = client_for(
        token_for(make_user("ba@provider.test", staff_role=StaffRole.BILLING_ADMIN), staff=True)
    )
    assert admin.get(f"/api/v1/invoices/{invoice.pk}/").json()["reverse_charge"] is True
    pdf = pdf_text(admin.get(f"/api/v1/invoices/{invoice.pk}/pdf/").content)
    assert "Reverse charge" in pdf and "Tax ID: DE123456789" in pdf
    assert "Reverse charge" not in pdf_text(admin.get(f"/api/v1/invoices/{domestic.pk}/pdf/").content)


def test_country_without_a_rate_is_zero_and_no_country_takes_the_default(eur_book, rates, fleet, settings):
    settings.BILLING_DEFAULT_TAX_RATE = "0.05"
    unlisted = _billed(fleet, "oslo", country="NO")
    assert (unlisted.tax_rate, unlisted.tax, unlisted.reverse_charge) == (
        Decimal("0"),
        Decimal("0.00"),
        False,
    )
    assert _billed(fleet, "nowhere").tax == Decimal("50.00")  # no billing country: BILLING_DEFAULT_TAX_RATE
    # the account's own rate overrides the table
    assert _billed(fleet, "override", country="DE", tax_rate=Decimal("0.07")).tax == Decimal("70.00")


def test_validation_and_overlaps(rates):
    with pytest.raises(ValidationFailed) as err:
        tax_rate_create(
            actor=None, country="XY", name="VAT", rate=Decimal(1), effective_from=dt.date(2026, 1, 1)
        )
    assert err.value.code == "invalid_country"
    with pytest.raises(ValidationFailed):
        tax_rate_create(
            actor=None, country="EU", name="VAT", rate=Decimal(1), effective_from=dt.date(2026, 1, 1)
        )
    with pytest.raises(ValidationFailed):
        tax_rate_create(
            actor=None,
            country="US",
            region="CA-ON",
            name="x",
            rate=Decimal(1),
            effective_from=dt.date(2026, 1, 1),
        )
    with pytest.raises(Conflict) as err:  # overlaps the open-ended 19 %
        tax_rate_create(
            actor=None, country="DE", name="VAT", rate=Decimal(20), effective_from=dt.date(2030, 1, 1)
        )
    assert err.value.code == "tax_rate_overlap"
    with pytest.raises(Conflict):  # inside the 16 % window
        tax_rate_create(
            actor=None,
            country="DE",
            name="VAT",
            rate=Decimal(15),
            effective_from=dt.date(2020, 1, 1),
            effective_to=dt.date(2020, 8, 1),
        )
    # touching windows are fine ([from, to) half-open)
    tax_rate_create(
        actor=None,
        country="DE",
        name="VAT",
        rate=Decimal(15),
        effective_from=dt.date(2020, 1, 1),
        effective_to=dt.date(2020, 7, 1),
    )
    with pytest.raises(ValidationFailed):
        billing_account_update(actor=None, organization=make_org("x")[0], country="Germany")


def test_staff_api_lists_and_creates_rates(rates):
    admin = client_for(
        token_for(make_user("ba@provider.test", staff_role=StaffRole.BILLING_ADMIN), staff=True)
    )
    created = admin.post(
        "/api/v1/tax-rates/",
        {"country": "fr", "name": "VAT", "rate": "20.000", "effective_from": "2014-01-01"},
        format="json",
    )
    assert created.status_code == 201, created.content
    assert (created.json()["country"], created.json()["rate"], created.json()["effective_to"]) == (
        "FR",
        "20.000",
        None,
    )
    again = admin.post(
        "/api/v1/tax-rates/",
        {"country": "FR", "name": "VAT", "rate": "21", "effective_from": "2020-01-01"},
        format="json",
    )
    assert (again.status_code, again.json()["code"]) == (409, "tax_rate_overlap")
    on = admin.get("/api/v1/tax-rates/", {"country": "DE", "on": "2020-12-31"}).json()["results"]
    assert [r["rate"] for r in on] == ["16.000"]
    org = make_org("y")[0]
    account = admin.post("/api/v1/billing-accounts/", {"organization": str(org.pk), "country": "at"}, format="json")
    assert account.status_code == 201 and account.json()["country"] == "AT"  # created
    again = admin.post("/api/v1/billing-accounts/", {"organization": str(org.pk), "tax_id": "ATU12345678"},
                       format="json")
    assert again.status_code == 200 and (again.json()["country"], again.json()["tax_id"]) == ("AT", "ATU12345678")


def test_shipped_yaml_loads_once_and_cites_sources(db):
    out = StringIO()
    call_command("billing_tax_rates_load", stdout=out)
    rows = yaml.safe_load(DEFAULT.read_text())["rates"]
    assert f"{len(rows)} created" in out.getvalue() and TaxRate.objects.count() == len(rows)
    assert TaxRate.objects.get(country="DE").rate == Decimal("19.000")
    assert TaxRate.objects.get(country="US").rate == Decimal("0")
    call_command("billing_tax_rates_load", stdout=out)
    assert TaxRate.objects.count() == len(rows) and f"{len(rows)} already loaded" in out.getvalue()
    lines = DEFAULT.read_text().splitlines()
    for i, line in enumerate(lines):  # every row is preceded by a comment naming its public source
        if line.strip().startswith("- {"):
            assert any("Source:" in lines[j] for j in range(max(0, i - 2), i)), line


def test_shipped_rates_answer_their_source_in_the_api(db):
    """The shipped file's rows carry their public source as data, so `GET /tax-rates` answers it; a row loaded
    before the file carried sources takes it on the next load."""
    TaxRate.objects.create(country="FR", name="VAT", rate=Decimal("20.000"), effective_from=dt.date(2014, 1, 1))
    out = StringIO()
    call_command("billing_tax_rates_load", stdout=out)
    shipped = yaml.safe_load(DEFAULT.read_text())["rates"]
    assert f"{len(shipped) - 1} created, 1 already loaded" in out.getvalue()
    admin = client_for(token_for(make_user("ba@provider.test", staff_role=StaffRole.BILLING_ADMIN), staff=True))
    rows = {r["country"]: r["source"] for r in admin.get("/api/v1/tax-rates/", {"page_size": 100}).json()["results"]}
    assert len(rows) == len(shipped) and all(rows.values()), rows
    eu = "European Commission, VAT rates in the EU, https://taxation-customs.ec.europa.eu/"
    assert rows["DE"].startswith(eu) and rows["FR"].startswith(eu)
    assert rows["US"] == "USAGov, State taxes, https://www.usa.gov/state-taxes"
