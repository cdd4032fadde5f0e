"""The customer's journey in the web console, in a real browser against the real stack: sign in, add an SSH key,
launch a MIG instance in the wizard (after the check refused it in an InfiniBand partition its hosts cannot join,
saying why, and with a cost estimate) and watch it become active without a reload, stop it (the page shows the new
status within 2.5 s of the API), resize it and read its audit events, find it in the instances list by a part of its
name and by status (a search that matches nothing offers to clear it); is shown why a flavor no host could hold
and a launch over the quota are refused (in the wizard, and the server's 422 on the clusters form), with nothing
made; launches an instance inside an active lease of the project; a second tenant who
types the first one's instance URL sees "not found"; a viewer sees write actions disabled. Each step is one test;
they share the journey's state (`C`) and run in file order; a failed step skips the later ones."""
from __future__ import annotations

import datetime as dt
import re
import time
from types import SimpleNamespace

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.stack import poll

from .conftest import check_a11y, shot
from .world import H100, PASSWORD, SSH_KEY, SSH_KEY_FP, catalog, invite, one, tenant

pytestmark = pytest.mark.e2e

C = SimpleNamespace()
ACTIVE_TIMEOUT_MS = 240_000
LIVE_STATUS_S = 2.5      # the page shows a status at most this long after the API answers it
MIG_LARGE = {"name": "h100-mig-3g40-large", "vcpus": 16, "memory_mib": 131072, "disk_gib": 100, "gpu_form": "mig",
             "gpu_model": H100, "mig_profile": "3g.40gb"}
MIG_HUGE = {"name": "h100-mig-3g40-huge", "vcpus": 1024, "memory_mib": 4194304, "disk_gib": 100, "gpu_form": "mig",
            "gpu_model": H100, "mig_profile": "3g.40gb"}


@pytest.fixture(scope="module")
def world(console_stack):
    C.stack = console_stack
    C.base = console_stack.base
    C.cat = catalog(console_stack)
    C.a = tenant(console_stack, C.cat.ops, "orbit", "owner@orbit.example")
    try:
        yield C
    finally:
        C.cat.follower.set()


@pytest.fixture
def c(request, world):
    failed = request.module.__dict__.get("_FAILED_STEPS")
    if failed:
        pytest.skip(f"an earlier step failed: {failed[0]}")
    return C


@pytest.fixture(scope="module")
def tab(browser, world):
    """One signed-in browser tab for the first tenant's steps (cookies kept between steps)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def sign_in(page: Page, base: str, email: str) -> None:
    page.goto(f"{base}/")
    expect(page).to_have_url(re.compile(r"/sign-in\?next=%2F$"))
    expect(page.get_by_role("heading", name="Sign in to gpucloud")).to_be_visible()
    page.get_by_label("E-mail").fill(email)
    page.get_by_label(re.compile(r"^Password")).fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()


def test_1_sign_in_wrong_password_then_right(c, tab):
    tab.goto(f"{c.base}/instances")
    expect(tab).to_have_url(re.compile(r"/sign-in\?next=%2Finstances$"))
    tab.get_by_label("E-mail").fill(c.a.email)
    tab.get_by_label(re.compile(r"^Password")).fill("not the password")
    tab.get_by_role("button", name="Sign in").click()
    expect(tab.get_by_role("alert")).to_contain_text("E-mail or password is wrong.")
    expect(tab.get_by_label("E-mail")).to_have_value(c.a.email)     # the form keeps what was typed
    check_a11y(tab, "sign in (failed)")
    shot(tab, "sign-in")
    tab.get_by_label(re.compile(r"^Password")).fill(PASSWORD)
    tab.get_by_role("button", name="Sign in").click()
    expect(tab).to_have_url(re.compile(r"/instances$"))            # back where the visitor wanted to go
    expect(tab.get_by_test_id("user-email")).to_have_text(c.a.email)
    tab.goto(f"{c.base}/")
    expect(tab.get_by_role("heading", name="Dashboard")).to_be_visible()
    check_a11y(tab, "dashboard (empty)")


def test_2_add_an_ssh_key(c, tab):
    tab.goto(f"{c.base}/ssh-keys")
    expect(tab.get_by_test_id("empty-state")).to_contain_text("No SSH keys yet")
    check_a11y(tab, "ssh keys (empty)")
    tab.get_by_label(re.compile(r"^Name")).fill("laptop")
    tab.get_by_label(re.compile(r"^Public key")).fill("ssh-ed25519 not-base64")
    tab.get_by_role("button", name="Add key").click()
    alert = tab.get_by_role("alert").first
    expect(alert).to_be_visible()
    expect(tab.get_by_label(re.compile(r"^Name"))).to_have_value("laptop")      # kept after the failure
    expect(tab.locator("[aria-invalid=true]")).to_have_count(1)                  # the field the API named
    tab.get_by_label(re.compile(r"^Public key")).fill(SSH_KEY)
    tab.get_by_role("button", name="Add key").click()
    row = tab.get_by_role("row", name=re.compile("laptop"))
    expect(row).to_contain_text(SSH_KEY_FP)
    expect(tab.get_by_label(re.compile(r"^Name"))).to_have_value("")           # cleared after success
    check_a11y(tab, "ssh keys")
    shot(tab, "ssh-keys")
    keys = c.a.api.get("ssh-keys", params={"project": c.a.project["id"]}).json()["results"]
    assert [k["fingerprint"] for k in keys] == [SSH_KEY_FP]


def test_3_launch_a_mig_instance_and_watch_it_become_active(c, tab):
    c.cat.ops.post("pkey-pools", {"fabric": "ib-compute", "first_pkey": "0x0100", "last_pkey": "0x01ff"},
                   expect=(200, 201))
    c.a.api.post("ib-partitions", {"project": c.a.project["id"], "fabric": "ib-compute", "name": "train"},
                 expect=201)
    tab.goto(f"{c.base}/instances")
    expect(tab.get_by_test_id("empty-state")).to_contain_text("No instances yet")
    tab.get_by_role("link", name="Launch an instance").click()
    expect(tab.get_by_role("heading", name="Launch an instance")).to_be_visible()
    tab.get_by_label(re.compile(r"h100-mig-3g40")).check()
    check_a11y(tab, "launch: flavor")
    shot(tab, "launch-1-flavor")
    tab.get_by_role("button", name="Next").click()
    tab.get_by_label(re.compile(r"^Name")).fill("notebook")
    tab.get_by_role("combobox", name=re.compile(r"^Image")).click()
    tab.get_by_role("option", name=re.compile("ubuntu-24-04")).click()
    tab.get_by_label(re.compile(r"^laptop")).check()
    check_a11y(tab, "launch: image and access")
    shot(tab, "launch-2-access")
    tab.get_by_role("button", name="Next").click()
    expect(tab.get_by_label("On-demand")).to_be_checked()
    partition = tab.get_by_role("combobox", name=re.compile(r"^InfiniBand partition"))
    partition.click()
    tab.get_by_role("option", name="train (ib-compute, 0x0100)").click()
    tab.get_by_role("button", name="Next").click()
    # the MIG host of fabric ib-compute has no virtual GUID to give a VM, the others no HCA port on it
    check = tab.get_by_test_id("placement-check")
    # the reason in words (the hosts without a port or a virtual GUID on the fabric), not the filter's name
    expect(check).to_contain_text("no HCA port on fabric ib-compute", timeout=30_000)
    expect(check).to_contain_text("no virtual GUID pool on its HCA ports on fabric ib-compute")
    expect(check).not_to_contain_text("ib_partition")
    expect(check).not_to_contain_text("Can be placed now")
    expect(tab.get_by_role("button", name="Launch", exact=True)).to_be_disabled()
    check_a11y(tab, "launch: refused in an InfiniBand partition")
    shot(tab, "launch-ib-partition-refused")
    tab.get_by_role("button", name="Back").click()
    tab.get_by_role("button", name="No InfiniBand partition").click()          # cleared: none
    expect(partition).to_have_value("")
    tab.get_by_role("button", name="Next").click()
    expect(check).to_contain_text("Can be placed now", timeout=30_000)
    expect(tab.get_by_test_id("price")).to_contain_text("$0.99 per hour")
    expect(tab.get_by_test_id("estimate")).to_contain_text("About $23.76 for 24 hours at $0.99 per hour (estimate)")
    check_a11y(tab, "launch: review")
    shot(tab, "launch-3-review")
    tab.get_by_role("button", name="Launch", exact=True).click()
    expect(tab).to_have_url(re.compile(r"/instances/[0-9a-f-]{36}$"))
    c.instance_id = tab.url.rsplit("/", 1)[1]
    expect(tab.get_by_role("heading", name="notebook")).to_be_visible()
    # live status: no reload, the page polls the instance
    expect(tab.get_by_test_id("status")).to_have_text("active", timeout=ACTIVE_TIMEOUT_MS)
    assert c.a.api.get(f"instances/{c.instance_id}").json()["status"] == "active"
    check_a11y(tab, "instance detail")
    shot(tab, "instance-detail")
    tab.get_by_role("tab", name="Console log").click()
    expect(tab.get_by_test_id("console-log").or_(tab.get_by_test_id("problem"))).to_be_visible()
    check_a11y(tab, "instance console log")
    shot(tab, "instance-console-log")
    tab.get_by_role("tab", name="Overview").click()


def test_4_stop_it_with_confirmation(c, tab):
    tab.get_by_role("button", name="Stop", exact=True).click()
    dialog = tab.get_by_role("dialog")
    expect(dialog).to_contain_text("Stop notebook?")
    check_a11y(tab, "stop confirmation")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    assert c.a.api.get(f"instances/{c.instance_id}").json()["status"] == "active"   # Cancel changed nothing
    expect(tab.get_by_test_id("availability")).to_contain_text("no downtime recorded")
    # live status: the page notes (its own clock, ms) when the badge first reads "stopped"; the test polls the API
    # every 0.2 s and notes when it first answers "stopped" (the same machine's clock)
    tab.evaluate("""() => { window.__stoppedAt = null; const seen = () => {
        const b = document.querySelector('[data-testid=status]');
        if (b && b.textContent.trim() === 'stopped' && window.__stoppedAt === null) window.__stoppedAt = Date.now(); };
        new MutationObserver(seen).observe(document.body, {subtree: true, childList: true, characterData: true}); }""")
    tab.get_by_role("button", name="Stop", exact=True).click()
    tab.get_by_role("dialog").get_by_role("button", name="Stop", exact=True).click()
    deadline = time.monotonic() + ACTIVE_TIMEOUT_MS / 1000
    while c.a.api.get(f"instances/{c.instance_id}").json()["status"] != "stopped":
        assert time.monotonic() < deadline, "the instance did not stop"
        time.sleep(0.2)
    api_at = time.time()
    expect(tab.get_by_test_id("status")).to_have_text("stopped", timeout=int(LIVE_STATUS_S * 1000) + 1000)
    page_at = tab.evaluate("() => window.__stoppedAt") / 1000
    lag = page_at - api_at
    print(f"live status: the page showed 'stopped' {lag:+.2f} s after the API answered it")
    assert lag <= LIVE_STATUS_S, f"the page showed the new status {lag:.2f} s after the API"
    expect(tab.get_by_role("button", name="Start", exact=True)).to_be_enabled()
    assert c.a.api.get(f"instances/{c.instance_id}").json()["status"] == "stopped"
    expect(tab.get_by_test_id("operation")).to_contain_text("done")


def test_4b_resize_the_stopped_instance(c, tab):
    large = one(c.cat.ops, "flavors", MIG_LARGE, name=MIG_LARGE["name"])
    one(c.cat.ops, "flavors", MIG_HUGE, name=MIG_HUGE["name"])
    tab.reload()    # the flavor catalog is cached for minutes
    expect(tab.get_by_test_id("status")).to_have_text("stopped")
    tab.get_by_test_id("resize").click()
    dialog = tab.get_by_role("dialog")
    expect(dialog).to_contain_text("Resize notebook")
    dialog.get_by_role("combobox", name="New flavor").click()
    dialog.get_by_role("option", name=re.compile(r"^h100-mig-3g40-huge")).click()
    dialog.get_by_role("button", name="Resize to h100-mig-3g40-huge").click()
    refusal = dialog.get_by_test_id("problem")
    expect(refusal).to_contain_text("The resize was refused")
    expect(dialog.get_by_role("combobox", name="New flavor")).to_have_value(re.compile(r"^h100-mig-3g40-huge"))  # the choice is kept
    assert c.a.api.get(f"instances/{c.instance_id}").json()["flavor"] == c.cat.flavor_mig["id"]   # nothing changed
    check_a11y(tab, "resize dialog (refused)")
    shot(tab, "instance-resize")
    dialog.get_by_role("combobox", name="New flavor").click()
    dialog.get_by_role("option", name=re.compile(r"^h100-mig-3g40-large")).click()
    expect(refusal).to_have_count(0)     # another choice, a new question
    dialog.get_by_role("button", name="Resize to h100-mig-3g40-large").click()
    expect(dialog).to_have_count(0)
    expect(tab.get_by_test_id("operation")).to_contain_text("Resize: done", timeout=ACTIVE_TIMEOUT_MS)
    expect(tab.get_by_test_id("status")).to_have_text("stopped")
    expect(tab.get_by_test_id("flavor")).to_contain_text("h100-mig-3g40-large")
    expect(tab.get_by_test_id("size")).to_contain_text("16 vCPU")
    assert c.a.api.get(f"instances/{c.instance_id}").json()["flavor"] == large["id"]
    tab.get_by_role("tab", name="Audit events").click()
    events = tab.get_by_test_id("instance-audit-event")
    expect(events.first).to_contain_text("compute.instance.resize")
    expect(events.filter(has_text="compute.instance.stop")).to_have_count(1)
    expect(events.filter(has_text="compute.instance.create")).to_have_count(1)
    check_a11y(tab, "instance audit events")
    shot(tab, "instance-audit")
    tab.get_by_role("tab", name="Overview").click()


def _tenant_state(c) -> dict:
    """What the tenant has, through the API: ids of instances and clusters, and operations not finished."""
    pid = c.a.project["id"]
    return {"instances": sorted(i["id"] for i in c.a.api.all("instances", project=pid)),
            "clusters": sorted(x["id"] for x in c.a.api.all("clusters", project=pid)),
            "operations": len(c.a.api.all("operations", project=pid)),
            "unfinished": [o["id"] for o in c.a.api.all("operations", project=pid, status=["pending", "running"])]}


def _to_review(tab, base: str, flavor: str, name: str) -> None:
    tab.goto(f"{base}/instances/new")
    tab.get_by_label(re.compile(rf"^{re.escape(flavor)} ")).check()
    tab.get_by_role("button", name="Next").click()
    tab.get_by_label(re.compile(r"^Name")).fill(name)
    tab.get_by_role("combobox", name=re.compile(r"^Image")).click()
    tab.get_by_role("option", name=re.compile("ubuntu-24-04")).click()
    tab.get_by_role("button", name="Next").click()
    tab.get_by_role("button", name="Next").click()


def test_4c_a_flavor_that_cannot_be_placed_and_a_quota_exceeded_leave_nothing(c, tab):
    before = _tenant_state(c)
    assert before["unfinished"] == []
    ask = {"project": c.a.project["id"], "name": "", "ssh_keys": [], "user_data": "", "queue": False}
    # a flavor no host could ever hold (1,024 vCPUs): the server's reason, as soon as it is chosen and at review
    huge = c.a.api.post("instances/check", {**ask, "flavor": one(c.cat.ops, "flavors", MIG_HUGE,
                                                                    name=MIG_HUGE["name"])["id"]}).json()
    assert huge["placeable"] is False and huge["detail"], huge
    tab.goto(f"{c.base}/instances/new")
    tab.get_by_label(re.compile(r"^h100-mig-3g40-huge ")).check()
    expect(tab.get_by_test_id("flavor-check")).to_contain_text(huge["detail"], timeout=30_000)
    _to_review(tab, c.base, "h100-mig-3g40-huge", "bigjob")
    check = tab.get_by_test_id("placement-check")
    expect(check).to_contain_text("Cannot be launched", timeout=30_000)
    expect(check).to_contain_text(f"Why: {huge['detail']}")
    expect(tab.get_by_role("button", name="Launch", exact=True)).to_be_disabled()
    shot(tab, "launch-unplaceable")
    tab.get_by_role("button", name="Back").click()
    tab.get_by_role("button", name="Back").click()
    expect(tab.get_by_label(re.compile(r"^Name"))).to_have_value("bigjob")       # the wizard keeps what was typed
    check_a11y(tab, "launch: flavor that cannot be placed")
    # a quota exceeded: the organization's instance quota set to what it uses now (the provider, as staff)
    quota = c.cat.ops.all("quotas", organization=c.a.org["id"], resource="instances")[0]
    used = c.cat.ops.get(f"quotas/{quota['id']}").json()["usage"]
    c.cat.ops.patch(f"quotas/{quota['id']}", {"limit": used}, expect=200)
    try:
        full = c.a.api.post("instances/check", {**ask, "flavor": c.cat.flavor_mig["id"]}).json()
        assert full["code"] == "quota_exceeded", full
        _to_review(tab, c.base, "h100-mig-3g40", "onemore")
        expect(check).to_contain_text(f"Why: {full['detail']}", timeout=30_000)
        expect(check.get_by_role("row", name=re.compile(r"Instances \(organization\) — exceeded"))).to_contain_text(str(used))
        expect(tab.get_by_role("button", name="Launch", exact=True)).to_be_disabled()
        check_a11y(tab, "launch: quota exceeded")
        shot(tab, "launch-quota-exceeded")
        # the clusters page sends the create itself: the server's 422 on the form, which keeps its values
        tab.goto(f"{c.base}/clusters")
        tab.get_by_label(re.compile(r"^Name")).fill("pair")
        tab.get_by_role("combobox", name="Flavor").click()
        tab.get_by_role("option", name=re.compile(r"^h100-mig-3g40 ")).click()
        tab.get_by_role("combobox", name="Image").click()
        tab.get_by_role("option", name=re.compile(r"^ubuntu-24-04")).click()
        tab.get_by_label(re.compile(r"^Size")).fill("2")
        tab.get_by_role("button", name="Create cluster").click()
        problem = tab.get_by_test_id("problem")
        expect(problem).to_contain_text("The cluster was not created")
        expect(problem).to_contain_text(f"Quota exceeded: {used} instances allowed, {used} in use, 2 more requested")
        expect(tab.get_by_label(re.compile(r"^Name"))).to_have_value("pair")
        expect(tab.get_by_label(re.compile(r"^Size"))).to_have_value("2")
        expect(tab.get_by_role("combobox", name="Flavor")).to_have_value(re.compile(r"^h100-mig-3g40 "))
        check_a11y(tab, "clusters: quota exceeded")
        shot(tab, "cluster-quota-exceeded")
    finally:
        c.cat.ops.patch(f"quotas/{quota['id']}", {"limit": quota["limit"]}, expect=200)
    after = _tenant_state(c)
    assert after["instances"] == before["instances"] and after["clusters"] == before["clusters"], (before, after)
    assert after["operations"] == before["operations"] and after["unfinished"] == [], (before, after)


def test_5_instances_list_and_dashboard(c, tab):
    tab.goto(f"{c.base}/instances")
    row = tab.get_by_role("row", name=re.compile("notebook"))
    expect(row).to_contain_text("stopped")
    expect(row).to_contain_text("MIG 3g.40gb")
    expect(row).to_contain_text("h100-mig-3g40-large")
    check_a11y(tab, "instances")
    shot(tab, "instances")
    # filters are the API's (name_contains, status): a search that matches nothing offers to clear it
    search = tab.get_by_role("searchbox", name="Search by name")
    search.fill("NOTE")
    expect(row).to_be_visible()
    search.fill("no-such-instance")
    expect(tab.get_by_test_id("empty-state")).to_contain_text("No instances match the filters")
    expect(row).to_have_count(0)
    check_a11y(tab, "instances: nothing matches")
    tab.get_by_role("button", name="Clear filters").click()
    expect(row).to_contain_text("stopped")
    expect(search).to_have_value("")
    tab.get_by_role("combobox", name="Filter by status").click()
    tab.get_by_role("option", name="active", exact=True).click()
    expect(tab.get_by_test_id("empty-state")).to_contain_text("No instances match the filters")
    tab.get_by_role("combobox", name="Filter by status").click()
    tab.get_by_role("option", name="stopped", exact=True).click()
    expect(row).to_contain_text("stopped")
    tab.get_by_role("link", name="Dashboard").click()
    expect(tab.get_by_test_id("stat-Running instances")).to_have_text("0")
    expect(tab.get_by_test_id("quota-use")).to_contain_text("Instances (organization)", timeout=30_000)
    expect(tab.get_by_test_id("quota-use")).to_contain_text("MIG slices")
    check_a11y(tab, "dashboard")
    shot(tab, "dashboard")


def test_5b_launch_inside_a_lease(c, tab):
    end = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=4)).replace(microsecond=0).isoformat()
    lease = c.a.api.post("leases", {"project": c.a.project["id"], "name": "burst", "start": "now", "end": end,
                                    "kind": "mig", "gpu_model": H100, "mig_profile": "3g.40gb", "count": 1},
                         expect=201).json()
    poll(lambda: c.a.api.get(f"leases/{lease['id']}").json()["status"] == "active", timeout=90,
         what="the lease to become active")
    _to_review(tab, c.base, "h100-mig-3g40", "leased")
    tab.get_by_role("button", name="Back").click()
    tab.get_by_label("Inside a lease").check()
    tab.get_by_role("combobox", name=re.compile(r"^Lease")).click()
    tab.get_by_role("option", name=re.compile(r"^burst \(1 × H100-SXM5-80GB MIG 3g\.40gb")).click()
    expect(tab.get_by_role("combobox", name=re.compile(r"^Subnet"))).to_be_disabled()
    check_a11y(tab, "launch: inside a lease")
    shot(tab, "launch-2b-how-many")
    tab.get_by_role("button", name="Next").click()
    expect(tab.get_by_test_id("lease-note")).to_be_visible()
    expect(tab.get_by_text(re.compile(r"^inside the lease burst"))).to_be_visible()
    shot(tab, "launch-lease-review")
    tab.get_by_role("button", name="Launch", exact=True).click()
    expect(tab).to_have_url(re.compile(r"/instances/[0-9a-f-]{36}$"))
    leased = tab.url.rsplit("/", 1)[1]
    expect(tab.get_by_role("heading", name="leased")).to_be_visible()
    expect(tab.get_by_test_id("status")).to_have_text("active", timeout=ACTIVE_TIMEOUT_MS)
    terms = c.a.api.get(f"instances/{leased}/capacity").json()
    assert (terms["market"], terms["lease"]) == ("lease", lease["id"]), terms


def test_6_another_tenant_typing_the_url_sees_not_found(c, browser):
    b = tenant(c.stack, c.cat.ops, "nebula", "owner@nebula.example")
    assert b.api.get(f"instances/{c.instance_id}", expect=404).json()["code"] == "not_found"
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        sign_in(page, c.base, b.email)
        page.goto(f"{c.base}/instances/{c.instance_id}")
        expect(page.get_by_role("heading", name="Not found")).to_be_visible()
        expect(page.get_by_text("notebook")).to_have_count(0)
        check_a11y(page, "not found")
        shot(page, "not-found")
    finally:
        context.close()


def test_7_a_viewer_sees_write_actions_disabled(c, browser):
    invite(c.stack, c.a.api, c.a.org, "auditor@orbit.example", "viewer")
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        sign_in(page, c.base, "auditor@orbit.example")
        expect(page.get_by_test_id("read-only")).to_be_visible()
        page.goto(f"{c.base}/ssh-keys")
        expect(page.get_by_role("button", name="Add key")).to_be_disabled()
        expect(page.get_by_role("button", name="Delete key laptop")).to_be_disabled()
        page.goto(f"{c.base}/instances/{c.instance_id}")
        expect(page.get_by_test_id("status")).to_have_text("stopped")
        expect(page.get_by_role("button", name="Start", exact=True)).to_be_disabled()
        expect(page.get_by_role("button", name="Delete", exact=True)).to_be_disabled()
        expect(page.get_by_test_id("resize")).to_be_disabled()
        expect(page.get_by_test_id("resize")).to_have_accessible_description(re.compile("read-only"))
        check_a11y(page, "viewer")
        shot(page, "viewer-read-only")
    finally:
        context.close()


def test_8_sign_out(c, tab):
    tab.get_by_role("button", name="Sign out").click()
    expect(tab).to_have_url(re.compile(r"/sign-in"))
    tab.goto(f"{c.base}/ssh-keys")
    expect(tab).to_have_url(re.compile(r"/sign-in\?next=%2Fssh-keys$"))
    assert c.a.api.get("session").json()["authenticated"] is True   # only the browser's session ended
