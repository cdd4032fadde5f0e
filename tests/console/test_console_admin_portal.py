"""The admin portal's capacity and tenant screens in a real browser against the real stack (the sample fleet):
an operator (password and second factor) sees the GPUs by model and zone with what the capacity API says, cordons a
host and sees its GPUs out of service, exports the figures as CSV; opens an organization, sees its quota with the
current use beside it, is refused a bad limit on the field and changes the quota (audited); a tenant gets "Not
found" on these routes and 404 from the staff endpoints behind them. Each step is one test; they share the state
(`P`) and run in file order; a failed step skips the later ones."""
from __future__ import annotations

import base64
import datetime as dt
import json
import re
import urllib.parse
from types import SimpleNamespace

import pytest
from playwright.sync_api import expect

from tests.e2e.stack import ROOT, Api, poll

from .conftest import check_a11y, shot
from .test_console import sign_in
from .test_console_fleet import _code
from .world import MIG_HOST, PASSWORD, catalog, tenant

pytestmark = pytest.mark.e2e

P = SimpleNamespace()
OPS = "ops@provider.example"
BILLING = "billing@provider.example"
H100 = "H100-SXM5-80GB"


def _enrol_second_factor(stack, email: str) -> bytes:
    """The staff member's password (set on the installation's shell, as for a first staff account) and its
    authenticator, enrolled through the API as the person would; returns the TOTP secret."""
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
    key = base64.b32decode(secret + "=" * (-len(secret) % 8))
    browser.post("me/totp/confirm", {"otp_token": _code(key)}, expect=(200, 201))
    return key


@pytest.fixture(scope="module")
def world(console_stack):
    P.stack = console_stack
    P.base = console_stack.base
    P.ops = Api(console_stack.base, console_stack.ops_token)
    P.ops.post("fleet/import", {"document": (ROOT / "apps/inventory/fleets/sample.yaml").read_text(),
                                "dry_run": False}, expect=(200, 201))
    P.a = tenant(console_stack, P.ops, "delta", "owner@delta.example")
    P.secret = _enrol_second_factor(console_stack, OPS)
    return P


@pytest.fixture
def pc(request, world):
    failed = request.module.__dict__.get("_FAILED_STEPS")
    if failed:
        pytest.skip(f"an earlier step failed: {failed[0]}")
    return P


@pytest.fixture(scope="module")
def tab(browser, world):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield page
    context.close()


def _now_bucket(api: Api) -> dict:
    start = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    rows = api.get("capacity", params={"start": start.isoformat(), "end": (start + dt.timedelta(minutes=5)).isoformat(),
                                       "step_s": 300}).json()
    return {(r["gpu_model"], r["zone"]): r for r in rows}


def _row(page, zone: str):
    return page.locator(f'[data-testid="capacity-row"][data-model="{H100}"][data-zone="{zone}"]')


def test_1_capacity_by_model_and_zone(pc, tab):
    tab.goto(f"{pc.base}/staff/capacity")
    expect(tab).to_have_url(re.compile(r"/sign-in\?next=%2Fstaff%2Fcapacity$"))
    tab.get_by_label("E-mail").fill(OPS)
    tab.get_by_label(re.compile(r"^Password")).fill(PASSWORD)
    tab.get_by_role("button", name="Sign in").click()
    tab.get_by_label(re.compile(r"^Authentication code")).fill(_code(pc.secret, ahead=1))
    tab.get_by_role("button", name="Verify code").click()
    expect(tab.get_by_role("heading", name="Capacity", exact=True)).to_be_visible()
    expect(tab.get_by_test_id("capacity-table")).to_have_attribute("data-ready", "true")
    summary = pc.ops.get("fleet/summary").json()
    zones = {z["name"]: sum(len(h["gpus"]) for k in z["racks"] for h in k["hosts"]
                            if h["gpu_model"].split("/")[0] == H100)
             for r in summary["regions"] for z in r["zones"]}
    zones = {zone: gpus for zone, gpus in zones.items() if gpus}
    now = _now_bucket(pc.ops)
    for zone, gpus in zones.items():
        row = _row(tab, zone)
        expect(row.locator("td").nth(2)).to_have_text(f"{gpus:,}")                 # Total
        free = now[(H100, zone)]["free_gpus"] if (H100, zone) in now else 0
        expect(row.get_by_test_id("capacity-free")).to_have_text(f"{free:,}")
    P.zone = sorted(zones)[0]
    P.out_before = int(_row(tab, P.zone).get_by_test_id("capacity-out").inner_text().replace(",", ""))
    expect(tab.get_by_test_id("capacity-ahead")).to_contain_text("Week of")
    expect(tab.get_by_test_id("capacity-slices").locator('[data-profile="3g.40gb"]').first).to_be_visible()
    # fragmentation and the queue beside the free figures, as the API says
    figures = pc.ops.get("capacity/fleet-figures").json()
    frag = {(f["gpu_model"], f["zone"]): f for f in figures["fragmentation"]}
    expect(_row(tab, P.zone).get_by_test_id("capacity-fragmented")).to_have_text(
        f'{frag[(H100, P.zone)]["fragmented_gpus"]:g}')
    expect(_row(tab, P.zone).get_by_test_id("capacity-block")).to_have_text(
        f'{frag[(H100, P.zone)]["largest_free_block"]:,}')
    expect(tab.get_by_test_id("capacity-queue")).to_contain_text(f'{figures["queue"]["waiting"]} waiting')
    # at 1,280 px the table fits: nothing to scroll sideways
    region = tab.get_by_role("region", name="GPUs by model and zone, now")
    assert region.evaluate("e => e.scrollWidth <= e.clientWidth"), region.evaluate("e => [e.scrollWidth, e.clientWidth]")
    check_a11y(tab, "admin capacity")
    shot(tab, "admin-capacity")


def test_2_a_cordoned_host_is_out_of_service_and_the_csv_says_so(pc, tab):
    host = sorted((h for h in pc.ops.all("hosts", state="available", zone=P.zone)), key=lambda h: h["name"])[0]
    pc.ops.post(f"hosts/{host['id']}/cordon", {"reason": "capacity screen test"}, expect=200)
    P.cordoned = host["name"]
    tab.reload()
    expect(tab.get_by_test_id("capacity-table")).to_have_attribute("data-ready", "true")
    gpus = [len(h["gpus"]) for r in pc.ops.get("fleet/summary").json()["regions"] for z in r["zones"]
            for k in z["racks"] for h in k["hosts"] if h["id"] == host["id"]][0]
    expect(_row(tab, P.zone).get_by_test_id("capacity-out")).to_have_text(f"{P.out_before + gpus:,}")
    with tab.expect_download() as dl:
        tab.get_by_role("button", name="Export CSV").click()
    lines = open(dl.value.path(), encoding="utf-8").read().splitlines()
    assert lines[0].startswith("gpu_model,zone,total,allocated,leased,on_demand,spot,reserved,free,out_of_service,")
    mine = [ln.split(",") for ln in lines[1:] if ln.startswith(f"{H100},{P.zone},")]
    assert mine and int(mine[0][9]) == P.out_before + gpus, lines
    head = lines[0].split(",")
    assert "fragmented_gpus" in head and head[-6:] == ["queue_waiting", "queue_waiting_gpus", "queue_longest_wait_s",
                                                       "queue_median_wait_s", "queue_placed_24h",
                                                       "queue_placed_wait_p50_s"], head
    total = lines[-1].split(",")
    assert total[:2] == ["All models", "all zones"] and int(total[-6]) == pc.ops.get(
        "capacity/fleet-figures").json()["queue"]["waiting"], lines[-1]


def test_3_add_a_quota_to_an_organization(pc, tab):
    tab.get_by_role("link", name="Tenants").click()
    expect(tab.get_by_role("heading", name="Tenants", exact=True)).to_be_visible()
    tab.get_by_label("Find an organization").fill("delt")
    expect(tab.get_by_test_id("tenant-row")).to_have_count(1)
    tab.get_by_role("button", name=pc.a.org["name"]).click()
    panel = tab.get_by_test_id("tenant-panel")
    expect(panel.get_by_test_id("tenant-projects")).to_have_text("Research")
    # the plan's quotas are there already; a resource is chosen by its name, the model typed beside it
    # by keyboard, as the list (near the page's foot) opens upwards and may move while the page scrolls to it
    resource = panel.get_by_role("combobox", name="Resource")
    resource.fill("GPUs")            # typed: the list narrows to "GPUs" and "vGPUs", in that order
    resource.press("ArrowDown")
    resource.press("Enter")
    expect(resource).to_have_value("GPUs")
    panel.get_by_label(re.compile(r"^GPU model")).fill(H100)
    panel.get_by_label(re.compile(r"^New limit")).fill("16")
    panel.get_by_role("button", name="Add quota").click()
    row = panel.locator(f'[data-testid="quota-row"][data-resource="gpus:{H100}"]')
    expect(row.get_by_test_id("quota-use")).to_have_text("0 of 16 (0 %)")
    # this month: spend to date from the invoice preview, the SLA standing, no open incident hitting it
    preview = pc.ops.get("invoices/preview", params={"organization": pc.a.org["id"]}).json()
    expect(panel.get_by_test_id("tenant-spend")).to_contain_text(f'{float(preview["total"]):,.2f} to date')   # "$0.00"
    expect(panel.get_by_test_id("tenant-sla")).to_contain_text("met (no provider-caused downtime on record)")
    expect(panel.get_by_test_id("tenant-incidents")).to_have_text("none")
    check_a11y(tab, "admin tenants")
    # the full-page picture from the top, nothing focused (a scrolled page draws its sticky header mid-picture)
    tab.evaluate("() => { document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0) }")
    shot(tab, "admin-tenants")


def test_4_change_the_quota_the_servers_refusal_on_the_field(pc, tab):
    panel = tab.get_by_test_id("tenant-panel")
    panel.get_by_role("button", name=f"Change the {H100} GPUs quota of {pc.a.org['name']}").click()
    dialog = tab.get_by_role("dialog", name=f"{H100} GPUs quota of {pc.a.org['name']}")
    field = dialog.get_by_label(re.compile(r"^Limit"))
    field.fill("-1")
    dialog.get_by_role("button", name="Save limit").click()
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(dialog).to_contain_text("greater than or equal to 0")
    check_a11y(tab, "quota dialog with the server's error")
    shot(tab, "admin-tenants-quota-refused")
    field.fill("32")
    dialog.get_by_role("button", name="Save limit").click()
    expect(dialog).to_be_hidden()
    expect(panel.locator(f'[data-testid="quota-row"][data-resource="gpus:{H100}"]').get_by_test_id("quota-use")
           ).to_have_text("0 of 32 (0 %)")
    quotas = pc.ops.get("quotas", params={"organization": pc.a.org["id"], "resource": f"gpus:{H100}"}).json()["results"]
    assert [q["limit"] for q in quotas] == [32]
    events = pc.ops.get("audit-events", params={"action": "quota.update",
                                                "organization": pc.a.org["id"]}).json()["results"]
    assert events and events[0]["after"]["limit"] == 32 and events[0]["before"]["limit"] == 16, events


def test_5_open_an_incident_for_a_host_and_close_it(pc, tab):
    host = sorted(h["name"] for h in pc.ops.all("hosts", state="available") if h["name"] != MIG_HOST)[-1]
    tab.get_by_role("link", name="Incidents").click()
    expect(tab.get_by_role("heading", name="Incidents", exact=True)).to_be_visible()
    tab.get_by_role("button", name="Open incident").click()
    dialog = tab.get_by_role("dialog", name="Open an incident")
    dialog.get_by_label(re.compile(r"^Host")).select_option(host)
    dialog.get_by_label(re.compile(r"^Reason")).fill("NVLink errors on every GPU")
    check_a11y(tab, "open an incident")
    dialog.get_by_role("button", name="Open incident").click()
    expect(dialog).to_be_hidden()
    row = tab.locator(f'[data-testid="incident-row"][data-host="{host}"]').first
    expect(row).to_have_attribute("data-open", "true")
    expect(row.get_by_test_id("incident-duration")).to_have_text("open")
    assert [h["state"] for h in pc.ops.all("hosts", name=host)] == ["faulty"]
    check_a11y(tab, "admin incidents")
    shot(tab, "admin-incidents-open")
    row.get_by_role("button", name=f"Close the incident of {host}").click()
    close = tab.get_by_role("dialog", name=f"Close the incident of {host}?")
    close.get_by_label(re.compile(r"^Reason")).fill("Baseboard replaced")
    close.get_by_role("button", name="Close incident").click()
    expect(close).to_be_hidden()
    expect(row).to_have_attribute("data-open", "false")
    expect(row.get_by_test_id("incident-duration")).not_to_have_text("open")
    incidents = pc.ops.get("incidents", params={"host": host}).json()["results"]
    assert incidents and incidents[0]["end"] and incidents[0]["provider_at_fault"], incidents
    expect(tab.get_by_test_id("sla-reports")).to_be_visible()
    P.incident = incidents[0]


def test_6_an_incident_s_downtime_and_credits_and_its_correction(pc, tab):
    """The closed incident's details: what it caused (as the impact API says) and a correction of its reason and
    fault; a start after its end is refused on the field."""
    inc = P.incident
    row = tab.locator(f'[data-testid="incident-row"][data-host="{inc["host"]}"]').first
    row.get_by_role("button", name=re.compile(rf"^Details of the incident of {inc['host']}")).click()
    dialog = tab.get_by_role("dialog", name=f"Incident of {inc['host']}")
    impact = pc.ops.get(f"incidents/{inc['id']}/impact").json()
    n = len(impact["resources"])
    expect(dialog.get_by_test_id("incident-impact-summary")).to_contain_text(f"{n} resource{'' if n == 1 else 's'} down")
    expect(dialog.get_by_test_id("incident-resource")).to_have_count(n)
    start = dialog.get_by_label(re.compile(r"^Start"))
    start.fill((dt.datetime.fromisoformat(inc["end"].replace("Z", "+00:00")) + dt.timedelta(minutes=5))
               .strftime("%Y-%m-%dT%H:%M"))
    dialog.get_by_role("button", name="Save changes").click()
    expect(start).to_have_attribute("aria-invalid", "true")
    start.fill(dt.datetime.fromisoformat(inc["start"].replace("Z", "+00:00")).strftime("%Y-%m-%dT%H:%M"))
    dialog.get_by_label(re.compile(r"^Reason")).fill("NVLink errors: a bad NVSwitch tray")
    dialog.get_by_label(re.compile(r"provider is at fault")).uncheck()
    dialog.get_by_role("button", name="Save changes").click()
    expect(dialog.get_by_role("status")).to_have_text("Saved.")
    check_a11y(tab, "incident details")
    shot(tab, "admin-incident-details")
    after = pc.ops.get(f"incidents/{inc['id']}").json()
    assert (after["reason"], after["provider_at_fault"]) == ("NVLink errors: a bad NVSwitch tray", False), after
    expect(dialog.get_by_test_id("incident-impact-summary")).to_contain_text("not the provider's fault")
    dialog.get_by_role("button", name="Close").first.click()
    expect(row).to_contain_text("a bad NVSwitch tray")


def test_7_the_whole_audit_log_filtered(pc, tab):
    """Staff read every organization's events: filtered to the tenant's organization and to staff, the quota change
    of step 4; filtered to the fleet's objects, the incident correction of step 6."""
    tab.get_by_role("link", name="Audit", exact=True).click()
    expect(tab.get_by_role("heading", name="Audit log", exact=True)).to_be_visible()
    expect(tab.get_by_test_id("audit-event").first).to_be_visible()
    tab.get_by_role("combobox", name=re.compile(r"^Organization")).click()
    tab.get_by_role("option", name=re.compile(rf"^{re.escape(pc.a.org['name'])} ")).click()
    tab.get_by_role("combobox", name=re.compile(r"^Actor kind")).click()
    tab.get_by_role("option", name="Provider staff").click()
    tab.get_by_role("button", name="Apply filters").click()
    rows = tab.get_by_test_id("audit-event")
    expect(rows.filter(has_text="quota.update").first).to_be_visible()
    expect(rows.filter(has_text="api_token.create")).to_have_count(0)
    for r in range(rows.count()):
        expect(rows.nth(r)).to_contain_text(pc.a.org["name"])
    check_a11y(tab, "admin audit log")
    shot(tab, "admin-audit")
    tab.get_by_role("button", name="Clear").click()
    tab.get_by_label(re.compile(r"^Object type")).fill("inventory.")
    tab.get_by_label(re.compile(r"^Action")).fill("inventory.incident.")
    tab.get_by_role("button", name="Apply filters").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(OPS)
    # the cordon of step 2: the host by its name, the action in words, what changed before → after
    tab.get_by_role("button", name="Clear").click()
    tab.get_by_label(re.compile(r"^Action")).fill("inventory.host.cordon")
    tab.get_by_role("button", name="Apply filters").click()
    cordon = rows.filter(has_text="capacity screen test").first
    expect(cordon.get_by_test_id("audit-object")).to_contain_text(P.cordoned)
    expect(cordon).to_contain_text("host: cordon")
    expect(cordon.get_by_test_id("audit-changes")).to_contain_text("state available → cordoned")
    check_a11y(tab, "admin audit log with names and changes")
    shot(tab, "admin-audit-changes")


def test_7b_health_events_of_the_fleet_filtered_by_host_and_kind(pc, tab):
    """Staff read the fleet's health events: one reported by the host's agent shows with its host, GPU, class and
    what ingest did; filtered to another kind it is gone."""
    host = {"name": P.cordoned}      # step 2's host, out of service already: a single correctable ECC changes nothing
    pc.stack.agents.start(pc.ops, host["name"])
    pc.stack.agents.agents[host["name"]].cp.health_event({"kind": "ecc_sbe", "gpu_index": 0, "dedup_key": "portal-sbe",
                                                         "message": "correctable ECC on GPU 0"})
    tab.get_by_role("link", name="Health events", exact=True).click()
    expect(tab.get_by_role("heading", name="Health events", exact=True)).to_be_visible()
    tab.get_by_label(re.compile(r"^Host")).fill(host["name"])
    tab.get_by_role("button", name="Apply filters").click()
    row = tab.locator(f'[data-testid="health-event"][data-host="{host["name"]}"][data-kind="ecc_sbe"]')
    expect(row).to_contain_text("GPU 0")
    expect(row).to_contain_text("correctable ECC on GPU 0")
    check_a11y(tab, "admin health events")
    shot(tab, "admin-health-events")
    tab.get_by_role("combobox", name=re.compile(r"^Kind")).click()
    tab.get_by_role("option", name="Thermal violation").click()
    tab.get_by_role("button", name="Apply filters").click()
    expect(row).to_have_count(0)


def _host_of(instance_id: str) -> dict:
    (host_id,) = {a["host"] for a in P.ops.all("allocations", consumer=instance_id)}
    return P.ops.get(f"hosts/{host_id}").json()


def _ts(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_8_an_incident_under_a_premium_vm_becomes_an_sla_credit_for_the_next_invoice(pc, tab, browser):
    """The tenant runs a VM on the premium tier; the operator opens an incident on its host from the Incidents
    screen (the tenant panel shows the incident hitting the tenant at once, before any usage is metered) and
    closes it; the billing admin runs the month's invoices (drafts) from the invoice-runs screen; the SLA credit
    the incident produced shows on the Incidents screen as due on the next invoice, in the incident's details and
    in the tenant panel, each equal to what the API says."""
    cat = catalog(pc.stack)
    vm = pc.a.api.post("instances", {"project": pc.a.project["id"], "name": "premium-trainer", "sla_tier": "premium",
                                     "flavor": cat.flavor_8x["id"], "image": cat.image["id"]},
                       headers={"Idempotency-Key": "portal-sla-vm"}, expect=202).json()["instance"]
    vm = poll(lambda: (x := pc.a.api.get(f"instances/{vm['id']}").json())["status"] == "active" and x,
              timeout=300, what="the premium instance active")
    host = _host_of(vm["id"])["name"]

    tab.goto(f"{pc.base}/staff/incidents")
    tab.get_by_role("button", name="Open incident").click()
    dialog = tab.get_by_role("dialog", name="Open an incident")
    dialog.get_by_label(re.compile(r"^Host")).select_option(host)
    dialog.get_by_label(re.compile(r"^Reason")).fill("GPU fell off the bus")
    dialog.get_by_role("button", name="Open incident").click()
    expect(dialog).to_be_hidden()
    row = tab.locator(f'[data-testid="incident-row"][data-host="{host}"][data-open="true"]')
    expect(row).to_have_count(1)
    # the tenant panel names the incident at once (the VM has no metered usage yet)
    tab.get_by_role("link", name="Tenants").click()
    tab.get_by_label("Find an organization").fill("delt")
    tab.get_by_role("button", name=pc.a.org["name"]).click()
    expect(tab.get_by_test_id("tenant-incidents")).to_contain_text(f"{host}: GPU fell off the bus")
    tab.get_by_role("link", name="Incidents").click()
    row = tab.locator(f'[data-testid="incident-row"][data-host="{host}"]').first
    row.get_by_role("button", name=f"Close the incident of {host}").click()
    close = tab.get_by_role("dialog", name=f"Close the incident of {host}?")
    close.get_by_label(re.compile(r"^Reason")).fill("GPU reseated")
    close.get_by_role("button", name="Close incident").click()
    expect(close).to_be_hidden()
    # this step's incident by its reason (an earlier step may have left a closed incident on the same host)
    [incident] = [i for i in pc.ops.get("incidents", params={"host": host}).json()["results"]
                  if i["reason"] == "GPU fell off the bus"]
    assert incident["end"] and incident["provider_at_fault"] is True, incident

    # usage is recorded over closed metering periods (60 s in this stack): wait for the one after the incident
    # and a minute of running, so the VM's month holds the incident's downtime
    step = int(pc.stack.env["BILLING_METERING_PERIOD_SECONDS"])
    need = max(_ts(incident["end"]), _ts(vm["launched_at"]) + dt.timedelta(seconds=65))
    boundary = dt.datetime.fromtimestamp(-(-need.timestamp() // step) * step, dt.UTC)
    poll(lambda: dt.datetime.now(dt.UTC) > boundary + dt.timedelta(seconds=2), timeout=step * 3 + 30,
         interval=0.5, what="the metering period after the incident to close")

    secret = _enrol_second_factor(pc.stack, BILLING)
    period = dt.datetime.now(dt.UTC).strftime("%Y-%m")
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    billing = context.new_page()
    billing.set_default_timeout(20_000)
    try:
        billing.goto(f"{pc.base}/staff/billing/invoice-runs")
        billing.get_by_label("E-mail").fill(BILLING)
        billing.get_by_label(re.compile(r"^Password")).fill(PASSWORD)
        billing.get_by_role("button", name="Sign in").click()
        billing.get_by_label(re.compile(r"^Authentication code")).fill(_code(secret, ahead=1))
        billing.get_by_role("button", name="Verify code").click()
        billing.get_by_label("Period").fill(period)
        billing.get_by_label("Finalize the invoices of months that have ended").uncheck()
        billing.get_by_role("button", name="Start run").click()
        run = billing.locator(f'[data-testid="invoice-run"][data-period="{period}"]').first
        expect(run.get_by_test_id("run-status")).to_have_text("completed", timeout=120_000)
    finally:
        context.close()

    reports = [r for r in pc.ops.all("sla-reports", organization=pc.a.org["id"], period=period)
               if r["resource_id"] == vm["id"]]
    assert len(reports) == 1 and reports[0]["sla_tier"] == "premium", reports
    report = reports[0]
    credit = float(report["credit_amount"])
    assert credit > 0 and report["applied_invoice"] is None, report          # pending: the next invoice takes it
    amount = f"${credit:,.2f}"
    tab.reload()
    sla = tab.get_by_test_id("sla-row").filter(has_text=vm["id"][-8:])
    expect(sla).to_have_count(1)
    expect(sla).to_contain_text("next invoice")
    expect(sla).to_contain_text(amount)
    expect(sla).to_contain_text("premium")
    impact = pc.ops.get(f"incidents/{incident['id']}/impact").json()
    [mine] = [r for r in impact["resources"] if r["resource_id"] == vm["id"]]
    assert mine["organization"] == pc.a.org["id"] and mine["credits"], impact
    [owed] = mine["credits"]
    assert owed["credit_amount"] == owed["report_credit_amount"] == report["credit_amount"], (  # its only incident
        json.dumps([owed, report, pc.ops.get("incidents", params={"host": host}).json()["results"], impact]))
    row = tab.locator(f'[data-testid="incident-row"][data-host="{host}"]').first
    row.get_by_role("button", name=re.compile(rf"^Details of the incident of {host}")).click()
    details = tab.get_by_role("dialog", name=f"Incident of {host}")
    expect(details.get_by_test_id("incident-impact-summary")).to_contain_text(f"SLA credits {amount}")
    expect(details.get_by_test_id("incident-resource").filter(has_text=vm["id"][-8:])).to_contain_text(
        f"{period}: {amount}")
    check_a11y(tab, "incident with its SLA credit")
    shot(tab, "admin-incident-sla-credit")
    details.get_by_role("button", name="Close").first.click()
    tab.get_by_role("link", name="Tenants").click()
    tab.get_by_label("Find an organization").fill("delt")
    tab.get_by_role("button", name=pc.a.org["name"]).click()
    standing = tab.get_by_test_id("tenant-sla")
    expect(standing).to_contain_text("missed")
    expect(standing).to_contain_text("premium tier")
    expect(standing).to_contain_text(f"credits {amount}")


def test_9_tenant_gets_not_found_on_the_admin_routes(pc, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        sign_in(page, pc.base, pc.a.email)
        for route in ("capacity", "tenants", "incidents", "health-events", "audit-log"):
            page.goto(f"{pc.base}/staff/{route}")
            expect(page.get_by_role("heading", name="Not found")).to_be_visible()
        expect(page.get_by_test_id("incident-list")).to_have_count(0)
        assert pc.a.api.get("incidents", expect=404).json()["code"] == "not_found"
        check_a11y(page, "admin tenants for a tenant")
    finally:
        context.close()


def test_10_the_host_panel_shows_each_gpu_s_mig_layout(pc, tab):
    """A tenant's MIG instance gets a 3g.40gb GPU instance on the MIG host; the operator's host panel shows that
    GPU's layout: the instance's profile name over its slices, and what is free."""
    cat = catalog(pc.stack)
    vm = pc.a.api.post("instances", {"project": pc.a.project["id"], "name": "mig-notebook", "flavor": cat.flavor_mig["id"],
                                     "image": cat.image["id"]},
                       headers={"Idempotency-Key": "portal-mig-vm"}, expect=202).json()["instance"]
    poll(lambda: pc.a.api.get(f"instances/{vm['id']}").json()["status"] == "active", timeout=300,
         what="the MIG instance active")
    host = _host_of(vm["id"])["name"]
    assert host == MIG_HOST, host
    gpus = [g for g in pc.ops.all("gpus", host=host) if g["gpu_instances"]]
    assert gpus, "no GPU instance recorded on the MIG host"
    tab.goto(f"{pc.base}/staff/fleet")
    tab.locator(f'[data-testid="heatmap-host"][data-host="{host}"]').click()
    panel = tab.get_by_test_id("host-panel")
    layout = panel.get_by_role("list", name=f"MIG layout of GPU {gpus[0]['index']}")
    expect(layout.locator('[data-testid="mig-gi"][data-profile="3g.40gb"]')).to_be_visible()
    expect(layout).to_contain_text("of 8 slices free")
    panel.scroll_into_view_if_needed()
    check_a11y(tab, "host panel with a MIG layout")
    tab.evaluate("window.scrollTo(0, 0)")
    shot(tab, "admin-fleet-mig-layout")


def test_11_an_operator_marks_a_host_spare_and_back(pc, tab):
    """An idle available host goes into the provider's spare pool from its panel (the dialog asks for the reason
    and confirms): the panel and the map show it as a spare and the API agrees; then it comes back out."""
    summary = pc.ops.get("fleet/summary").json()
    hosts = [h for r in summary["regions"] for z in r["zones"] for k in z["racks"] for h in k["hosts"]]
    host = next(h for h in hosts if h["condition"] == "available" and not h["spare"] and h["gpus"]
                and all(g["state"] == "free" for g in h["gpus"]))
    tab.goto(f"{pc.base}/staff/fleet")
    row = tab.locator(f'[data-testid="heatmap-host"][data-host="{host["name"]}"]')
    row.click()
    panel = tab.get_by_test_id("host-panel")
    expect(panel.get_by_test_id("host-spare-pool")).to_have_text("no")
    panel.get_by_role("button", name="Mark spare").click()
    dialog = tab.get_by_role("dialog", name=f"Make {host['name']} a spare?")
    expect(dialog).to_contain_text("no new placement lands on it")
    dialog.get_by_label("Reason").fill("spare pool for lease replacements")
    check_a11y(tab, "the Mark spare dialog")
    dialog.get_by_role("button", name="Mark spare").click()
    expect(panel.get_by_test_id("host-spare")).to_have_text("spare")
    expect(row.get_by_test_id("heatmap-spare")).to_be_visible()
    assert pc.ops.get(f"hosts/{host['id']}").json()["spare"] is True
    tab.evaluate("window.scrollTo(0, 0)")
    shot(tab, "admin-fleet-host-spare")
    panel.get_by_role("button", name="Unmark spare").click()
    dialog = tab.get_by_role("dialog", name=f"Take {host['name']} out of the spare pool?")
    dialog.get_by_label("Reason").fill("back to on-demand")
    dialog.get_by_role("button", name="Unmark spare").click()
    expect(panel.get_by_test_id("host-spare-pool")).to_have_text("no")
    assert pc.ops.get(f"hosts/{host['id']}").json()["spare"] is False
