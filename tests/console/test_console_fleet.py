"""The admin portal's fleet heat map in a real browser against the real stack (the sample fleet): provider staff
(an operator, who must sign in with a second factor) see the heat map of the fleet, open a host, cordon it with a
reason and see its condition change; a tenant signed in to the same console finds no Admin section and gets "Not
found" on the admin routes (`/staff/...`; the API answers it 404). Each step is one test; they share the state (`F`) and run in file
order; a failed step skips the later ones."""
from __future__ import annotations

import base64
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

F = SimpleNamespace()
OPS = "ops@provider.example"


def _code(secret: bytes, ahead: int = 0) -> str:
    return str(totp(secret, step=30, t0=0, digits=6, drift=ahead)).zfill(6)


@pytest.fixture(scope="module")
def world(console_stack):
    F.stack = console_stack
    F.base = console_stack.base
    F.ops = Api(console_stack.base, console_stack.ops_token)
    F.ops.post("fleet/import", {"document": (ROOT / "apps/inventory/fleets/sample.yaml").read_text(),
                                "dry_run": False}, expect=(200, 201))
    F.host = sorted(h["name"] for h in F.ops.all("hosts", state="available"))[0]
    F.a = tenant(console_stack, F.ops, "delta", "owner@delta.example")
    # the operator's password is set the way an installation sets its first staff's (manage.py); the second
    # factor, which staff must have, is enrolled through the API as the person would
    console_stack._manage("shell", "-c", (
        "from apps.identity.models import User\n"
        f"u = User.objects.get(email={OPS!r}); u.set_password({PASSWORD!r}); u.save()\n"))
    browser = Api(console_stack.base)
    browser.s.headers["X-CSRFToken"] = browser.get("session").json()["csrf_token"]
    state = browser.post("session", {"email": OPS, "password": PASSWORD}, expect=200).json()
    assert state["second_factor_needed"] == "two_factor_required", state
    browser.s.headers["X-CSRFToken"] = browser.s.cookies.get("csrftoken")
    url = browser.post("me/totp", expect=201).json()["config_url"]
    secret = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)["secret"][0]
    F.secret = base64.b32decode(secret + "=" * (-len(secret) % 8))
    browser.post("me/totp/confirm", {"otp_token": _code(F.secret)}, expect=(200, 201))
    return F


@pytest.fixture
def fc(request, world):
    failed = request.module.__dict__.get("_FAILED_STEPS")
    if failed:
        pytest.skip(f"an earlier step failed: {failed[0]}")
    return F


@pytest.fixture(scope="module")
def tab(browser, world):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def test_1_staff_sees_the_heat_map_of_the_sample_fleet(fc, tab):
    tab.goto(f"{fc.base}/staff/fleet")
    expect(tab).to_have_url(re.compile(r"/sign-in\?next=%2Fstaff%2Ffleet$"))
    tab.get_by_label("E-mail").fill(OPS)
    tab.get_by_label(re.compile(r"^Password")).fill(PASSWORD)
    tab.get_by_role("button", name="Sign in").click()
    tab.get_by_label(re.compile(r"^Authentication code")).fill(_code(fc.secret, ahead=1))   # the next window's
    tab.get_by_role("button", name="Verify code").click()
    expect(tab.get_by_role("heading", name="Fleet", exact=True)).to_be_visible()
    expect(tab.get_by_test_id("admin-nav")).to_be_visible()
    hosts = fc.ops.all("hosts")
    expect(tab.get_by_test_id("heatmap-host")).to_have_count(len([h for h in hosts if h["state"] != "retired"]))
    expect(tab.get_by_test_id("heatmap-legend")).to_contain_text("Scrub failed")
    expect(tab.get_by_test_id("fleet-counts")).to_contain_text(f"{len(hosts)} hosts")
    check_a11y(tab, "admin fleet heat map")
    shot(tab, "admin-fleet")


def test_2_cordon_a_host_with_a_reason(fc, tab):
    tab.locator(f'[data-testid="heatmap-host"][data-host="{fc.host}"]').click()
    panel = tab.get_by_test_id("host-panel")
    expect(panel.get_by_test_id("host-condition")).to_have_text("available")
    panel.get_by_role("button", name="Cordon").click()
    dialog = tab.get_by_role("dialog", name=f"Cordon {fc.host}?")
    expect(dialog.get_by_role("button", name="Cordon")).to_be_disabled()
    dialog.get_by_label(re.compile(r"^Reason")).fill("PSU replacement in the rack")
    check_a11y(tab, "cordon dialog")
    dialog.get_by_role("button", name="Cordon").click()
    expect(dialog).to_be_hidden()
    expect(panel.get_by_test_id("host-condition")).to_have_text("cordoned")
    expect(panel.get_by_test_id("host-reason")).to_have_text("PSU replacement in the rack")
    expect(tab.locator(f'[data-testid="heatmap-host"][data-host="{fc.host}"]')).to_have_attribute(
        "data-condition", "cordoned")
    host = [h for h in fc.ops.all("hosts") if h["name"] == fc.host][0]
    assert host["state"] == "cordoned" and host["state_reason"] == "PSU replacement in the rack"
    expect(panel.get_by_role("button", name="Mark available")).to_be_visible()   # what the server allows now
    expect(panel.get_by_role("button", name="Cordon")).to_have_count(0)
    check_a11y(tab, "host panel")
    shot(tab, "admin-fleet-host-cordoned")


def test_3_tenant_gets_not_found_on_the_admin_routes(fc, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        sign_in(page, fc.base, fc.a.email)
        expect(page.get_by_test_id("admin-nav")).to_have_count(0)
        page.goto(f"{fc.base}/staff/fleet")
        expect(page.get_by_role("heading", name="Not found")).to_be_visible()
        expect(page.get_by_test_id("heatmap")).to_have_count(0)
        assert fc.a.api.get("fleet/summary", expect=404).json()["code"] == "not_found"
        # /admin itself is the server's (never the console's): a 404 problem for everyone
        assert fc.a.api.get(f"{fc.base}/admin/fleet", expect=404).headers["Content-Type"].startswith(
            "application/problem+json")
        check_a11y(page, "admin route for a tenant")
    finally:
        context.close()
