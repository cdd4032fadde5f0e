"""Billing in the web console, in a real browser against the real stack: a member who does not read the
organization's bills sees "not available for your role" (the server refuses the month to date); the owner sees the
month to date with the charge of a floating IP held over closed metering periods, the total the API computes; then,
with last month invoiced and a credit note issued against it, the credit note (PDF and CSV) and the SLA report's
section on the Billing screen, and the month-to-date spend on the dashboard.
Each step is one test; they share the state (`B`) and run in file order; a failed step skips the later ones."""
from __future__ import annotations

import datetime as dt
import time
from decimal import Decimal
from types import SimpleNamespace

import pytest
from playwright.sync_api import expect

from tests.e2e.stack import Api, poll

from .conftest import check_a11y, shot
from .test_console import sign_in
from .world import invite, tenant

pytestmark = pytest.mark.e2e

B = SimpleNamespace()
PRICE = "3.60"   # per hour: a tenth of a cent a second


@pytest.fixture(scope="module")
def world(console_stack):
    B.stack = console_stack
    B.base = console_stack.base
    B.ops = Api(console_stack.base, console_stack.ops_token)
    B.billing = Api(console_stack.base, console_stack.billing_token)
    book = B.billing.post("price-books", {"name": "list prices", "currency": "USD",
                                          "effective_from": "2026-01-01T00:00:00Z"}, expect=201).json()
    for tier in ("standard", "premium"):
        B.billing.post(f"price-books/{book['id']}/prices", {
            "sku": "public_ip", "sla_tier": tier, "pricing_model": "on_demand", "unit": "hour", "unit_price": PRICE,
            "billing_increment_seconds": 1, "minimum_seconds": 60}, expect=(200, 201))
    B.ops.post("public-ip-pools", {"name": "public", "cidr": "203.0.113.0/24", "first_ip": "203.0.113.10",
                                   "last_ip": "203.0.113.250", "gateway_ip": "203.0.113.1",
                                   "network_name": "physnet-public"}, expect=201)
    B.a = tenant(console_stack, B.ops, "ledger", "owner@ledger.example")
    vpc = B.a.api.post("vpcs", {"project": B.a.project["id"], "name": "prod", "cidr": "10.30.0.0/16"},
                       expect=201).json()
    B.ip = B.a.api.post("public-ips", {"vpc": vpc["id"], "pool": "public"}, expect=201).json()
    B.held_since = dt.datetime.now(dt.UTC)
    return B


@pytest.fixture
def b(request, world):
    failed = request.module.__dict__.get("_FAILED_STEPS")
    if failed:
        pytest.skip(f"an earlier step failed: {failed[0]}")
    return B


def test_1_a_member_sees_billing_not_available(b, browser):
    invite(b.stack, b.a.api, b.a.org, "engineer@ledger.example", "member")
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        sign_in(page, b.base, "engineer@ledger.example")
        page.get_by_role("link", name="Billing").click()
        notice = page.get_by_test_id("billing-not-available")
        expect(notice).to_contain_text("Billing is not available for your role")
        expect(notice).to_contain_text("your role in Ledger is member")
        expect(page.get_by_role("table", name="Invoices")).to_have_count(0)
        check_a11y(page, "billing (member)")
        shot(page, "billing-not-available")
    finally:
        context.close()


def test_2_the_owner_sees_the_month_to_date_total(b, browser):
    # Usage is recorded over closed one-minute metering periods: hold the address past the per-start minimum
    # (60 s) and one period boundary, then have the usage collected (a run for the month, not finalized).
    step = 60
    need = b.held_since + dt.timedelta(seconds=65)
    boundary = dt.datetime.fromtimestamp(-(-need.timestamp() // step) * step, dt.UTC)
    time.sleep(max(0.0, (boundary - dt.datetime.now(dt.UTC)).total_seconds() + 1))
    period = dt.datetime.now(dt.UTC).strftime("%Y-%m")
    run = b.billing.post("invoice-runs", {"period": period, "finalize": False}, expect=202).json()

    def completed():
        body = b.billing.get(f"invoice-runs/{run['id']}").json()
        assert body["status"] != "failed", body
        return body if body["status"] == "completed" else None

    poll(completed, timeout=120, interval=0.5, what="the invoice run to complete")
    preview = b.a.api.get("invoices/preview", params={"organization": b.a.org["id"]}).json()
    assert Decimal(preview["total"]) > 0 and any(ln["sku"] == "public_ip" for ln in preview["lines"]), preview

    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        sign_in(page, b.base, b.a.email)
        page.get_by_role("link", name="Billing").click()
        box = page.get_by_test_id("month-to-date")
        expect(box.get_by_role("heading")).to_contain_text(f"Month to date — {period}")
        expect(box.get_by_test_id("total")).to_have_text(f"${Decimal(preview['total']):,.2f}")
        charges = page.get_by_role("table", name="Month-to-date charges")
        expect(charges.get_by_test_id("invoice-line").filter(has_text="public_ip")).to_have_count(1)
        expect(page.get_by_test_id("empty-state")).to_contain_text("No invoices yet")   # drafts are staff-only
        check_a11y(page, "billing")
        shot(page, "billing")
    finally:
        context.close()


def _month(delta: int) -> dt.date:
    first = dt.date.today().replace(day=1)
    month = first.month - 1 + delta
    return first.replace(year=first.year + month // 12, month=month % 12 + 1)


def test_3_the_owner_sees_a_credit_note_the_sla_report_and_the_spend(b, browser):
    last = _month(-1).strftime("%Y-%m")
    b.billing.post("adjustments", {"organization": b.a.org["id"], "period": last, "amount": "80.00",
                                   "description": "Onboarding workshop"}, expect=201)
    run = b.billing.post("invoice-runs", {"period": last, "finalize": True}, expect=202).json()
    poll(lambda: b.billing.get(f"invoice-runs/{run['id']}").json()["status"] == "completed", timeout=120,
         interval=0.5, what="last month's invoice run to complete")
    invoice = [i for i in b.billing.all("invoices", organization=b.a.org["id"]) if i["period"] == last][0]
    assert invoice["status"] == "finalized", invoice
    note = b.billing.post("credit-notes", {"invoice": invoice["id"], "amount": "20.00",
                                           "reason": "Workshop cut short by an hour"}, expect=201).json()
    preview = b.a.api.get("invoices/preview", params={"organization": b.a.org["id"]}).json()

    context = browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
    page = context.new_page()
    try:
        sign_in(page, b.base, b.a.email)
        expect(page.get_by_test_id("stat-spend")).to_have_text(f"${Decimal(preview['total']):,.2f}")
        expect(page.get_by_test_id("recent-health")).to_contain_text("No faults were seen")
        check_a11y(page, "dashboard with spend")
        shot(page, "dashboard-spend")
        page.get_by_role("link", name="Billing").click()
        row = page.get_by_test_id("credit-note")
        expect(row).to_contain_text(note["display_number"])
        expect(row).to_contain_text("Workshop cut short by an hour")
        expect(row.get_by_role("link", name=invoice["display_number"])).to_be_visible()
        with page.expect_download() as pdf:
            row.get_by_role("link", name=f"PDF of {note['display_number']}").click()
        assert open(pdf.value.path(), "rb").read(5) == b"%PDF-"
        with page.expect_download() as csv:
            row.get_by_role("link", name=f"CSV of {note['display_number']}").click()
        assert "Workshop cut short by an hour" in open(csv.value.path(), encoding="utf-8").read()
        sla = page.get_by_test_id("sla-report")
        expect(sla.get_by_role("heading", name="SLA report")).to_be_visible()
        expect(sla.get_by_test_id("sla-empty")).to_contain_text("every resource met its SLA")   # no downtime here
        check_a11y(page, "billing with credit notes")
        shot(page, "billing-credit-notes")
    finally:
        context.close()
