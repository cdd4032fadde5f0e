"""The admin portal's fleet heat map in a real browser against the real stack (the sample fleet): provider staff
(an operator, who must sign in with a second factor) see the heat map of the fleet, open a host, cordon it with a
reason and see its condition change. Then an operator's day: a tenant's 8-GPU VM runs on a host whose node agent
reports a double-bit ECC error (XID 48) on one of its GPUs; the operator finds the host on the heat map (the GPU
state filter, the cell's colour), sees the VM and its planned move in the host's panel, drains the host with a
reason (which stops nothing itself: the dialog says so and names what still runs); the tenant, who sees the
checkpoint notice of its project's consent mode (auto) on its instance, moves it now; the operator watches health
re-create the VM on another host and the tenant sees it active again; the agent scrubs the GPUs it left, and the
operator returns the GPU to service and marks the host available. A tenant signed in to the same console finds no Admin section and gets "Not found" on the
admin routes (`/staff/...`; the API answers it 404). Each step is one test; they share the state (`F`) and run in
file order; a failed step skips the later ones."""
from __future__ import annotations

import base64
import re
import urllib.parse
from types import SimpleNamespace

import pytest
from django_otp.oath import totp
from playwright.sync_api import expect

from tests.e2e.stack import ROOT, Api, poll

from .conftest import check_a11y, shot
from .test_console import sign_in
from .world import PASSWORD, catalog, tenant

pytestmark = pytest.mark.e2e

F = SimpleNamespace()
OPS = "ops@provider.example"
NOTICE_S = 3600        # the tenant's checkpoint notice; the tenant moves its VM sooner ("Move now")
MOVE_TIMEOUT_MS = 240_000


def _code(secret: bytes, ahead: int = 0) -> str:
    return str(totp(secret, step=30, t0=0, digits=6, drift=ahead)).zfill(6)


@pytest.fixture(scope="module")
def world(console_stack):
    F.stack = console_stack
    F.base = console_stack.base
    F.ops = Api(console_stack.base, console_stack.ops_token)
    F.ops.post("fleet/import", {"document": (ROOT / "apps/inventory/fleets/sample.yaml").read_text(),
                                "dry_run": False}, expect=(200, 201))
    F.a = tenant(console_stack, F.ops, "delta", "owner@delta.example")
    cat = catalog(console_stack)
    F.follower = cat.follower
    # the tenant's VM, moved off failed hardware after a checkpoint notice (its project's consent mode)
    F.a.api.req("PUT", f"projects/{F.a.project['id']}/remediation-policy",
                json={"consent_mode": "auto", "notice_seconds": NOTICE_S}, expect=200)
    vm = F.a.api.post("instances", {"project": F.a.project["id"], "name": "trainer", "flavor": cat.flavor_8x["id"],
                                    "image": cat.image["id"]}, headers={"Idempotency-Key": "fleet-day-vm"},
                      expect=202).json()["instance"]
    F.vm = poll(lambda: (x := F.a.api.get(f"instances/{vm['id']}").json())["status"] == "active" and x,
                timeout=300, what="the tenant's instance active")
    F.vm_host = _host_of(F.vm["id"])
    F.host = sorted(h["name"] for h in F.ops.all("hosts", state="available") if h["name"] != F.vm_host)[0]
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
    yield F
    F.follower.set()


def _shot(tab, name: str) -> None:
    tab.evaluate("window.scrollTo(0, 0)")   # a full-page shot of a scrolled page draws the fixed header mid-page
    shot(tab, name)


def _host_of(instance_id: str) -> str:
    (host_id,) = {a["host"] for a in F.ops.all("allocations", consumer=instance_id)}
    return F.ops.get(f"hosts/{host_id}").json()["name"]


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
    # the operator belongs to no organization: it reads every tenant, but gets no tenant screens (Members, API
    # tokens...) where it could change nothing (docs/adr/0104)
    expect(tab.get_by_test_id("tenant-nav")).to_have_count(0)
    expect(tab.get_by_role("link", name="Members")).to_have_count(0)
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


def test_3_a_faulty_gpu_is_found_on_the_heat_map(fc, tab):
    fc.stack.agents.start(fc.ops, fc.vm_host)   # no-op when it runs already
    agent = fc.stack.agents.agents[fc.vm_host]
    r = agent.cp.health_event({"kind": "xid", "xid": 48, "gpu_index": 0, "dedup_key": "fleet-day-xid48",
                               "message": "double-bit ECC error"})
    assert r["classification"] == "gpu_memory_uncorrectable" and len(r["applied"]["remediations"]) == 1, r
    tab.reload()
    expect(tab.get_by_test_id("heatmap-host")).not_to_have_count(0)
    tab.get_by_role("combobox", name="GPU state").click()
    tab.get_by_role("option", name="Faulty", exact=True).click()
    rows = tab.get_by_test_id("heatmap-host")
    expect(rows).to_have_count(1)                 # the only host with a faulty GPU
    row = tab.locator(f'[data-testid="heatmap-host"][data-host="{fc.vm_host}"]')
    expect(row).to_contain_text("1 faulty")
    cell = row.locator('[title="GPU 0: Faulty"]')
    expect(cell).to_have_css("background-color", "rgb(201, 42, 42)")   # the legend's faulty red
    row.click()
    panel = tab.get_by_test_id("host-panel")
    expect(panel.get_by_test_id("host-condition")).to_have_text("available")   # XID 48 takes out the GPU only
    expect(panel.locator('[data-testid="host-gpu"][data-index="0"]')).to_have_attribute("data-state", "faulty")
    expect(panel.locator('[data-testid="host-gpu"][data-index="1"]')).to_have_attribute("data-state", "allocated")
    workload = panel.get_by_test_id("host-workload")
    expect(workload).to_have_count(1)
    expect(workload).to_contain_text("trainer")
    expect(workload).to_contain_text("Delta / Research")
    expect(workload).to_contain_text("GPU 0, GPU 1, GPU 2, GPU 3, GPU 4, GPU 5, GPU 6, GPU 7")
    move = panel.locator('[data-testid="host-move"][data-name="trainer"]')
    expect(move).to_have_attribute("data-status", "notice")
    expect(move).to_contain_text("checkpoint notice sent")
    # the tenant's side: its instance carries the notice (the API object guest tooling polls)
    assert fc.a.api.get(f"instances/{fc.vm['id']}").json()["maintenance"]["status"] == "notice"
    check_a11y(tab, "host detail with a faulty GPU")
    _shot(tab, "admin-fleet-faulty-gpu")


def test_4_tenant_sees_the_notice_on_its_instance(fc, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        sign_in(page, fc.base, fc.a.email)
        page.goto(f"{fc.base}/instances/{fc.vm['id']}")
        expect(page.get_by_test_id("maintenance")).to_contain_text("re-created on a healthy host at")
        expect(page.get_by_test_id("status")).to_have_text("active")
        F.tenant_context, F.tenant_page = context, page
    except Exception:
        context.close()
        raise


def test_5_drain_says_what_it_does_and_what_still_runs(fc, tab):
    panel = tab.get_by_test_id("host-panel")
    panel.get_by_role("button", name="Drain").click()
    dialog = tab.get_by_role("dialog", name=f"Drain {fc.vm_host}?")
    expect(dialog).to_contain_text("Draining does not stop or move what runs there")
    expect(dialog.get_by_test_id("drain-stays")).to_have_text("Still running on it: trainer (Delta).")
    dialog.get_by_label(re.compile(r"^Reason")).fill("GPU 0 double-bit ECC (XID 48): RMA")
    check_a11y(tab, "drain dialog")
    dialog.get_by_role("button", name="Drain").click()
    expect(dialog).to_be_hidden()
    expect(panel.get_by_test_id("host-condition")).to_have_text("draining")
    expect(tab.locator(f'[data-testid="heatmap-host"][data-host="{fc.vm_host}"]')).to_have_attribute(
        "data-condition", "draining")
    host = fc.ops.all("hosts", name=fc.vm_host)[0]
    assert (host["state"], host["state_reason"]) == ("draining", "GPU 0 double-bit ECC (XID 48): RMA")


def test_6_the_tenant_moves_it_now_and_the_operator_sees_it_move(fc, tab):
    page = fc.tenant_page
    page.get_by_role("button", name="Move now").click()
    page.get_by_role("dialog", name="Move trainer to a healthy host now?").get_by_role("button", name="Move now").click()
    expect(page.get_by_test_id("maintenance")).to_contain_text("being re-created on a healthy host")
    panel = tab.get_by_test_id("host-panel")
    move = panel.locator('[data-testid="host-move"][data-name="trainer"]')
    expect(move).to_have_attribute("data-status", "succeeded", timeout=MOVE_TIMEOUT_MS)
    to_host = _host_of(fc.vm["id"])
    assert to_host != fc.vm_host
    expect(move).to_contain_text(f"moved to {to_host}")
    expect(panel.get_by_test_id("host-workloads-none")).to_have_text("Nothing runs on this host now.")
    # the map follows what the panel saw: no GPU of the host is held any more
    expect(tab.locator(f'[data-testid="heatmap-host"][data-host="{fc.vm_host}"]')).not_to_contain_text("allocated")
    vm = fc.a.api.get(f"instances/{fc.vm['id']}").json()
    assert (vm["status"], vm["maintenance"], vm["name"]) == ("active", None, "trainer")   # the same VM
    page.reload()
    expect(page.get_by_test_id("status")).to_have_text("active")
    expect(page.get_by_test_id("maintenance")).to_have_count(0)
    fc.tenant_context.close()
    _shot(tab, "admin-fleet-host-drained")


def test_7_scrubbed_gpu_back_in_service_host_available(fc, tab):
    panel = tab.get_by_test_id("host-panel")
    # the GPUs the VM left are scrubbed by the host's agent before the host may take tenants again
    expect(panel.locator('[data-testid="host-gpu"][data-state="dirty"]')).to_have_count(0, timeout=120_000)
    expect(panel.locator('[data-testid="host-gpu"][data-state="free"]')).to_have_count(7)
    panel.get_by_role("button", name="Mark healthy: GPU 0").click()
    dialog = tab.get_by_role("dialog", name=f"Mark GPU 0 of {fc.vm_host} healthy?")
    dialog.get_by_label(re.compile(r"^Reason")).fill("GPU replaced under RMA")
    dialog.get_by_role("button", name="Mark healthy").click()
    expect(dialog).to_be_hidden()
    expect(panel.locator('[data-testid="host-gpu"][data-index="0"]')).to_have_attribute("data-state", "free")
    panel.get_by_role("button", name="Mark available").click()
    dialog = tab.get_by_role("dialog", name=f"Mark available {fc.vm_host}?")
    dialog.get_by_label(re.compile(r"^Reason")).fill("Repaired and checked")
    dialog.get_by_role("button", name="Mark available").click()
    expect(dialog).to_be_hidden()
    expect(panel.get_by_test_id("host-condition")).to_have_text("available")
    host = fc.ops.all("hosts", name=fc.vm_host)[0]
    assert host["state"] == "available"
    assert {g["health"] for g in fc.ops.all("gpus", host=fc.vm_host)} == {"ok"}
    check_a11y(tab, "host detail")
    _shot(tab, "admin-fleet-host-back")


def test_7b_one_gpu_marked_faulty_and_healthy_from_the_panel(fc, tab):
    """An operator takes one GPU out of placement (its own incident; the host and its other GPUs stay in service),
    then puts it back."""
    panel = tab.get_by_test_id("host-panel")
    panel.get_by_role("button", name="Mark faulty: GPU 3").click()
    dialog = tab.get_by_role("dialog", name=f"Mark GPU 3 of {fc.vm_host} faulty?")
    dialog.get_by_label(re.compile(r"^Reason")).fill("XID 79 on this GPU only")
    dialog.get_by_role("button", name="Mark faulty").click()
    expect(dialog).to_be_hidden()
    expect(panel.locator('[data-testid="host-gpu"][data-index="3"]')).to_have_attribute("data-state", "faulty")
    gpus = {g["index"]: g["health"] for g in fc.ops.all("gpus", host=fc.vm_host)}
    assert gpus[3] == "faulty" and {h for i, h in gpus.items() if i != 3} == {"ok"}, gpus
    assert fc.ops.all("hosts", name=fc.vm_host)[0]["state"] == "available"
    incidents = [i for i in fc.ops.all("incidents", host=fc.vm_host, open="true") if i["gpu_index"] == 3]
    assert len(incidents) == 1 and incidents[0]["reason"] == "XID 79 on this GPU only", incidents
    panel.get_by_role("button", name="Mark healthy: GPU 3").click()
    dialog = tab.get_by_role("dialog", name=f"Mark GPU 3 of {fc.vm_host} healthy?")
    dialog.get_by_label(re.compile(r"^Reason")).fill("Reseated")
    dialog.get_by_role("button", name="Mark healthy").click()
    expect(panel.locator('[data-testid="host-gpu"][data-index="3"]')).to_have_attribute("data-state", "free")


def test_7c_on_a_narrow_screen_a_chosen_host_s_panel_is_scrolled_into_view(fc, tab):
    """Below the map's two-column width the host panel sits under the whole map: choosing a host brings it into
    view instead of seeming to do nothing."""
    tab.set_viewport_size({"width": 900, "height": 800})
    try:
        tab.goto(f"{fc.base}/staff/fleet")          # the map unfiltered, from the top of the page
        tab.locator(f'[data-testid="heatmap-host"][data-host="{fc.host}"]').click()
        panel = tab.get_by_test_id("host-panel")
        expect(panel).to_contain_text(fc.host)
        expect(panel).to_be_in_viewport()
        _shot(tab, "admin-fleet-narrow-host")
    finally:
        tab.set_viewport_size({"width": 1280, "height": 900})


def test_8_tenant_gets_not_found_on_the_admin_routes(fc, browser):
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
