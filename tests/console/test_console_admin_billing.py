"""The admin portal's billing screens and staff roles in a real browser against the real stack (the sample
fleet): a billing admin (password and second factor) publishes a price-book version starting next month and
sees the server refuse a second one at the same start on the field; runs the invoice run for last month, follows
it, finalizes a tenant's draft after reading how its line was computed, downloads the PDF and issues a credit note
seen on the invoice. Then the roles: support staff read every billing screen and the fleet with every change
disabled or absent (and the API refuses them), a billing admin finds no Drain on a host (and the API refuses it),
and a tenant gets "Not found" on every admin route, in the console and from the staff API. Each step is one
test; they share the state (`B`) and run in file order; a failed step skips the later ones."""
from __future__ import annotations

import base64
import datetime as dt
import re
import urllib.parse
from types import SimpleNamespace

import pytest
from django_otp.oath import totp
from playwright.sync_api import expect

from tests.e2e.stack import ROOT, Api

from .conftest import check_a11y, shot
from .test_console import sign_in
from .world import PASSWORD, tenant

pytestmark = pytest.mark.e2e

B = SimpleNamespace()
BILLING = "billing@provider.example"
SUPPORT = "support@provider.example"
SKU = "flavor:name=h100-8x"


def _month(offset: int) -> dt.date:
    today = dt.datetime.now(dt.UTC).date().replace(day=1)
    month = today.month - 1 + offset
    return dt.date(today.year + month // 12, month % 12 + 1, 1)


def _code(secret: bytes, ahead: int = 0) -> str:
    return str(totp(secret, step=30, t0=0, digits=6, drift=ahead)).zfill(6)


def _enrol(stack, email: str) -> bytes:
    """The staff member's password (set on the shell, as an installation does) and second factor (enrolled through
    the API, as the person would); returns the authenticator's secret."""
    stack._manage("shell", "-c", (
        "from apps.identity.models import User\n"
        f"u = User.objects.get(email={email!r}); u.set_password({PASSWORD!r}); u.save()\n"))
    browser = Api(stack.base)
    browser.s.headers["X-CSRFToken"] = browser.get("session").json()["csrf_token"]
    state = browser.post("session", {"email": email, "password": PASSWORD}, expect=200).json()
    assert state["second_factor_needed"] == "two_factor_required", state
    browser.s.headers["X-CSRFToken"] = browser.s.cookies.get("csrftoken")
    url = browser.post("me/totp", expect=201).json()["config_url"]
    secret = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)["secret"][0]
    secret = base64.b32decode(secret + "=" * (-len(secret) % 8))
    browser.post("me/totp/confirm", {"otp_token": _code(secret)}, expect=(200, 201))
    return secret


def _staff_sign_in(page, email: str, secret: bytes, path: str) -> None:
    page.goto(f"{B.base}{path}")
    expect(page).to_have_url(re.compile(r"/sign-in\?next="))
    page.get_by_label("E-mail").fill(email)
    page.get_by_label(re.compile(r"^Password")).fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_label(re.compile(r"^Authentication code")).fill(_code(secret, ahead=1))   # the next window's
    page.get_by_role("button", name="Verify code").click()
    expect(page.get_by_test_id("admin-nav")).to_be_visible()


@pytest.fixture(scope="module")
def world(console_stack):
    B.stack, B.base = console_stack, console_stack.base
    B.ops = Api(console_stack.base, console_stack.ops_token)
    B.billing = Api(console_stack.base, console_stack.billing_token)
    B.ops.post("fleet/import", {"document": (ROOT / "apps/inventory/fleets/sample.yaml").read_text(),
                                "dry_run": False}, expect=(200, 201))
    B.host = sorted(h["id"] for h in B.ops.all("hosts", state="available"))[0]
    B.host_name = B.ops.get(f"hosts/{B.host}").json()["name"]
    B.a = tenant(console_stack, B.ops, "orbit", "owner@orbit.example")
    console_stack._manage("shell", "-c", (
        "from apps.identity.models import User\n"
        f"User.objects.create_user({SUPPORT!r}, full_name='Support', staff_role='support')\n"))
    B.support = Api(console_stack.base, console_stack._manage(
        "create_api_token", "--email", SUPPORT, "--staff", "--scope", "write", "--name", "e2e").strip().splitlines()[-1])
    if not B.billing.all("price-books"):
        B.billing.post("price-books", {"name": "list prices", "currency": "USD", "effective_from": "2026-01-01T00:00:00Z",
                                       "prices": [{"sku": SKU, "sla_tier": "standard", "pricing_model": "on_demand",
                                                   "unit": "hour", "unit_price": "19.92"}]}, expect=201)
    B.last = _month(-1).strftime("%Y-%m")
    B.next = _month(1).isoformat() + "T00:00:00Z"
    # last month's charge for the tenant (no usage needed): what the invoice run invoices
    B.billing.post("adjustments", {"organization": B.a.org["id"], "period": B.last, "amount": "250.00",
                                   "description": "Onboarding workshop"}, expect=201)
    B.secret_billing = _enrol(console_stack, BILLING)
    B.secret_support = _enrol(console_stack, SUPPORT)
    return B


@pytest.fixture
def bc(request, world):
    failed = request.module.__dict__.get("_FAILED_STEPS")
    if failed:
        pytest.skip(f"an earlier step failed: {failed[0]}")
    return B


@pytest.fixture(scope="module")
def tab(browser, world):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def test_1_billing_admin_publishes_a_price_book_version_for_next_month(bc, tab):
    _staff_sign_in(tab, BILLING, bc.secret_billing, "/staff/billing/price-books")
    expect(tab.get_by_role("heading", name="Billing: price books")).to_be_visible()
    expect(tab.get_by_test_id("price-book")).to_have_count(1)
    tab.get_by_role("button", name="New version").click()
    dialog = tab.get_by_role("dialog", name="New price book version")
    expect(dialog.get_by_test_id("effective-from")).to_have_value(bc.next[:16])
    row = dialog.locator(f'[data-testid="price-row"][data-sku="{SKU}"][data-tier="standard"]')
    expect(row).to_contain_text("19.92 / hour")
    row.get_by_role("textbox").fill("17.50")
    expect(dialog.get_by_test_id("changed-count")).to_have_text("1 price change; the others stay in force.")
    check_a11y(tab, "new price book version")
    shot(tab, "admin-billing-price-book-version")
    dialog.get_by_role("button", name="Publish version").click()
    expect(dialog).to_be_hidden()
    expect(tab.get_by_test_id("price-book")).to_have_count(2)
    books = [b for b in bc.billing.all("price-books") if b["effective_from"] == bc.next]
    assert [(p["sku"], p["unit_price"]) for b in books for p in b["prices"]] == [(SKU, "17.500000")]
    new = tab.locator(f'[data-testid="price-book"][data-name="{books[0]["name"]}"]')
    expect(new).to_contain_text("scheduled")
    new.get_by_role("button", name=books[0]["name"]).click()
    expect(tab.get_by_test_id("book-price")).to_contain_text("19.92")   # the price it replaces, beside the new one
    expect(tab.get_by_test_id("book-price")).to_contain_text("17.50 / hour")
    check_a11y(tab, "price books")
    shot(tab, "admin-billing-price-books")

    # the same start again: the server's refusal stands on the field, and nothing more is created
    tab.get_by_role("button", name="New version").click()
    dialog.locator('[data-testid="price-row"]').first.get_by_role("textbox").fill("16.00")
    dialog.get_by_role("button", name="Publish version").click()
    expect(dialog.get_by_text(re.compile(r"A USD price book already starts at"))).to_be_visible()
    expect(dialog.get_by_test_id("effective-from")).to_have_attribute("aria-invalid", "true")
    check_a11y(tab, "price book version refused")
    dialog.get_by_role("button", name="Cancel").click()
    assert len(bc.billing.all("price-books")) == 2


def test_2_run_the_invoice_run_for_last_month_and_follow_it(bc, tab):
    tab.get_by_role("link", name="Invoice runs").click()
    expect(tab.get_by_label("Period")).to_have_value(bc.last)
    tab.get_by_label("Finalize the invoices of months that have ended").uncheck()   # drafts: finalized by hand next
    tab.get_by_role("button", name="Start run").click()
    run = tab.locator(f'[data-testid="invoice-run"][data-period="{bc.last}"]')
    expect(run.get_by_test_id("run-status")).to_have_text("completed", timeout=90_000)
    expect(run).to_contain_text("1 drafted")
    check_a11y(tab, "invoice runs")
    run.get_by_role("link").click()
    expect(tab.get_by_role("heading", name=f"Invoice run {bc.last}")).to_be_visible()
    expect(tab.get_by_test_id("run-progress")).to_have_text("Completed: 1 drafted, 0 finalized")
    expect(tab.locator('[data-testid="staff-invoice"][data-organization="Orbit"]')).to_contain_text("$250.00")
    check_a11y(tab, "invoice run")
    shot(tab, "admin-billing-invoice-run")


def test_3_explain_a_line_finalize_the_invoice_and_download_its_pdf(bc, tab):
    tab.locator('[data-testid="staff-invoice"][data-organization="Orbit"]').get_by_role("link").click()
    expect(tab.get_by_role("heading", name=f"Draft invoice {bc.last}")).to_be_visible()
    tab.get_by_role("button", name="Explain Onboarding workshop").click()
    expect(tab.get_by_test_id("explain-steps")).to_contain_text("A manual charge a billing admin added for the month: $250.00")
    check_a11y(tab, "invoice line explained")
    tab.get_by_role("button", name="Finalize").click()
    tab.get_by_role("dialog").get_by_role("button", name="Finalize").click()
    expect(tab.get_by_role("heading", name=re.compile(r"^Invoice INV-\d+$"))).to_be_visible()
    expect(tab.get_by_test_id("invoice-status")).to_have_text("finalized")
    invoice = [i for i in bc.billing.all("invoices", organization=bc.a.org["id"]) if i["period"] == bc.last][0]
    assert invoice["status"] == "finalized" and invoice["total"] == "250.00"
    bc.invoice = invoice
    with tab.expect_download() as download:
        tab.get_by_role("link", name="Download PDF").click()
    assert open(download.value.path(), "rb").read(5) == b"%PDF-"


def test_4_issue_a_credit_note_and_see_it_on_the_invoice(bc, tab):
    tab.get_by_role("button", name="Issue credit note").click()
    dialog = tab.get_by_role("dialog", name=f"Credit note against {bc.invoice['display_number']}")
    dialog.get_by_label(re.compile(r"^Amount before tax")).fill("50")
    dialog.get_by_label(re.compile(r"^Reason")).fill("Workshop cut short by an hour")
    check_a11y(tab, "credit note dialog")
    dialog.get_by_role("button", name="Issue").click()
    expect(dialog).to_be_hidden()
    expect(tab.get_by_test_id("credit-note")).to_contain_text("Workshop cut short by an hour")
    expect(tab.get_by_test_id("credited")).to_have_text("$50.00")
    notes = bc.billing.all("credit-notes", invoice=bc.invoice["id"])
    assert [(n["amount"], n["reason"]) for n in notes] == [("50.00", "Workshop cut short by an hour")]
    check_a11y(tab, "invoice with a credit note")
    shot(tab, "admin-billing-invoice")
    tab.get_by_role("link", name="← Invoices").click()
    row = tab.locator('[data-testid="staff-invoice"][data-organization="Orbit"]')
    expect(row).to_contain_text(bc.invoice["display_number"])
    expect(row).to_contain_text("$200.00")   # the balance due after the credit note
    check_a11y(tab, "invoices")


def test_5_a_billing_admin_cannot_drain_a_host(bc, tab):
    tab.goto(f"{bc.base}/staff/fleet")
    tab.locator(f'[data-testid="heatmap-host"][data-host="{bc.host_name}"]').click()
    panel = tab.get_by_test_id("host-panel")
    expect(panel).to_contain_text("No action is open to you on this host now")
    expect(panel.get_by_role("button", name="Drain")).to_have_count(0)
    r = bc.billing.post(f"hosts/{bc.host}/drain", {"reason": "billing tries"}, expect=403)
    assert r.json()["code"] == "permission_denied"
    assert bc.ops.get(f"hosts/{bc.host}").json()["state"] == "available"


def test_6_support_reads_everything_and_changes_nothing(bc, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        _staff_sign_in(page, SUPPORT, bc.secret_support, "/staff/billing/price-books")
        expect(page.get_by_test_id("price-book")).to_have_count(2)
        expect(page.get_by_role("button", name="New version")).to_be_disabled()
        page.goto(f"{bc.base}/staff/billing/invoice-runs")
        # the run of test 2, and the one finalizing by hand records for the organization (docs/billing.md)
        expect(page.get_by_test_id("invoice-run")).to_have_count(len(bc.billing.all("invoice-runs")))
        expect(page.get_by_role("button", name="Start run")).to_be_disabled()
        page.goto(f"{bc.base}/staff/billing/invoices/{bc.invoice['id']}")
        expect(page.get_by_test_id("credit-note")).to_have_count(1)
        expect(page.get_by_role("button", name="Issue credit note")).to_be_disabled()
        check_a11y(page, "invoice for support")
        shot(page, "admin-billing-invoice-support")
        page.goto(f"{bc.base}/staff/fleet")
        page.locator(f'[data-testid="heatmap-host"][data-host="{bc.host_name}"]').click()
        expect(page.get_by_test_id("host-panel")).to_contain_text("No action is open to you on this host now")
        # and the server refuses what the screens do not offer
        for method, path, body in (
                ("post", "price-books", {"name": "x", "currency": "USD", "effective_from": _month(2).isoformat() + "T00:00:00Z"}),
                ("post", "invoice-runs", {"period": bc.last}),
                ("post", "credit-notes", {"invoice": bc.invoice["id"], "amount": "1.00", "reason": "x"}),
                ("post", f"hosts/{bc.host}/drain", {"reason": "support tries"}),
                ("post", f"hosts/{bc.host}/cordon", {"reason": "support tries"})):
            assert getattr(bc.support, method)(path, body, expect=403).json()["code"] == "permission_denied", path
        assert bc.support.get("fleet/summary").status_code == 200
    finally:
        context.close()


def test_7_a_tenant_gets_not_found_on_every_admin_route(bc, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        sign_in(page, bc.base, bc.a.email)
        expect(page.get_by_test_id("admin-nav")).to_have_count(0)
        for path in ("/staff/fleet", "/staff/billing/price-books", "/staff/billing/invoice-runs",
                     "/staff/billing/invoices", f"/staff/billing/invoices/{bc.invoice['id']}"):
            page.goto(f"{bc.base}{path}")
            expect(page.get_by_role("heading", name=re.compile(r"^Not found"))).to_be_visible()
        check_a11y(page, "admin route for a tenant")
        api = bc.a.api   # the owner's console session
        for method, path, body in (
                ("get", "fleet/summary", None), ("get", "hosts", None), ("get", f"hosts/{bc.host}", None),
                ("get", "price-books", None), ("get", "invoice-runs", None),
                ("post", f"hosts/{bc.host}/drain", {"reason": "tenant tries"}),
                ("post", "price-books", {"name": "x", "currency": "USD", "effective_from": bc.next}),
                ("post", "invoice-runs", {"period": bc.last}),
                ("post", f"invoices/{bc.invoice['id']}/finalize", {}),
                ("post", "credit-notes", {"invoice": bc.invoice["id"], "amount": "1.00", "reason": "x"})):
            r = api.get(path, expect=404) if method == "get" else api.post(path, body, expect=404)
            assert r.json()["code"] == "not_found", (path, r.json())
    finally:
        context.close()
