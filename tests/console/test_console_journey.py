"""The tenant's whole journey in the web console, as one browser test against the real stack (web, worker, beat,
PostgreSQL, Redis, OVN, the sample fleet and its agents): sign in, add an SSH key, create a VPC, a subnet and a
security group, launch a MIG instance on them and watch it become active, see a health event of its GPU, launch a
2-node cluster and watch it become active only once its members are, request a lease and see it on the calendar,
see the month's usage grow, download an invoice PDF, create and revoke an API token, invite a member who accepts
the e-mailed link, signs in with the viewer role and cannot launch; a second tenant signed in sees none of it,
and typing the first tenant's resource URLs shows "not found".

Everything the tenant does goes through the console. What the provider does is done as the provider would, through
the API with staff tokens: the catalog and prices (`world.catalog`), the organization and its owner
(`world.tenant`), the operator's node agent reporting a GPU signal, the billing admin's invoice runs (and an
adjustment on last month, so that a finalized invoice exists: a month in progress cannot be finalized). The API is
also read to check that what the page shows is what the server has."""
from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.stack import Api, poll

from .conftest import check_a11y, shot
from .test_console import ACTIVE_TIMEOUT_MS, sign_in
from .world import MIG_HOST, PASSWORD, SSH_KEY, SSH_KEY_FP, WHOLE_FLAVOR, catalog, tenant

pytestmark = pytest.mark.e2e

CLUSTER_TIMEOUT_MS = 300_000


@pytest.fixture(scope="module")
def world(console_stack):
    cat = catalog(console_stack)
    try:
        yield console_stack, cat
    finally:
        cat.follower.set()


def _money(text: str) -> Decimal:
    return Decimal(re.sub(r"[^0-9.\-]", "", text))


def _invoice_run(billing: Api, period: str, *, finalize: bool) -> dict:
    run = billing.post("invoice-runs", {"period": period, "finalize": finalize}, expect=202).json()

    def completed():
        body = billing.get(f"invoice-runs/{run['id']}").json()
        assert body["status"] != "failed", body
        return body if body["status"] == "completed" else None

    return poll(completed, timeout=180, interval=0.5, what=f"the invoice run for {period} to complete")


def _new_page(browser) -> Page:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    return page


def _go(tab, link: str, heading: str) -> None:
    """Follow a navigation link and wait for the screen's heading: screens are loaded on demand, so typing at once
    could land in the previous screen's field of the same label."""
    tab.get_by_role("link", name=link).click()
    expect(tab.get_by_role("heading", name=heading, level=2).first).to_be_visible()


def test_the_tenants_journey_through_the_console(world, browser):  # noqa: PLR0915 - one journey, step by step
    stack, cat = world
    base = stack.base
    a = tenant(stack, cat.ops, "meridian", "owner@meridian.example")
    tab = _new_page(browser)

    # --- sign in -----------------------------------------------------------------------------------------------
    sign_in(tab, base, a.email)
    expect(tab.get_by_test_id("user-email")).to_have_text(a.email)

    # --- an SSH key ----------------------------------------------------------------------------------------------
    _go(tab, "SSH keys", "SSH keys")
    tab.get_by_label(re.compile(r"^Name")).fill("laptop")
    tab.get_by_label(re.compile(r"^Public key")).fill(SSH_KEY)
    tab.get_by_role("button", name="Add key").click()
    expect(tab.get_by_role("row", name=re.compile("laptop"))).to_contain_text(SSH_KEY_FP)

    # --- a VPC, a subnet, a security group with an SSH rule ------------------------------------------------------
    _go(tab, "Networking", "Networking")
    tab.get_by_label(re.compile(r"^Name")).fill("prod")
    tab.get_by_label(re.compile(r"^IPv4 CIDR")).fill("10.40.0.0/16")
    tab.get_by_role("button", name="Create VPC").click()
    expect(tab.get_by_role("row", name=re.compile("prod"))).to_contain_text("10.40.0.0/16")
    tab.get_by_role("link", name="prod").click()
    expect(tab.get_by_role("heading", name="prod")).to_be_visible()
    vpc_url = tab.url
    tab.get_by_label(re.compile(r"^Name")).fill("gpu")
    tab.get_by_label(re.compile(r"^CIDR")).fill("10.40.1.0/24")
    tab.get_by_role("button", name="Add subnet").click()
    expect(tab.get_by_role("row", name=re.compile("gpu"))).to_contain_text("10.40.1.1")
    tab.get_by_role("tab", name="Security groups").click()
    create_sg = tab.get_by_role("region", name="Create a security group")
    create_sg.get_by_label(re.compile(r"^Name")).fill("ssh")
    create_sg.get_by_label(re.compile(r"^Description")).fill("SSH from the office")
    create_sg.get_by_role("button", name="Create security group").click()
    group = tab.get_by_test_id("sg-ssh")
    expect(group).to_be_visible()
    tab.get_by_label("From port (ssh)").fill("22")
    tab.get_by_label("Remote prefix (ssh)").fill("198.51.100.0/24")
    tab.get_by_role("button", name="Add rule to ssh").click()
    expect(group.get_by_test_id("rule").filter(has_text="tcp 22").filter(has_text="198.51.100.0/24")).to_have_count(1)
    check_a11y(tab, "journey: security groups")
    shot(tab, "journey-security-group")
    vpcs = a.api.get("vpcs", params={"project": a.project["id"]}).json()["results"]
    assert [(v["name"], v["cidr"]) for v in vpcs] == [("prod", "10.40.0.0/16")]
    groups = {g["name"]: g for g in a.api.get("security-groups", params={"vpc": vpcs[0]["id"]}).json()["results"]}
    assert set(groups) == {"default", "ssh"}

    # --- a MIG instance on that subnet and group, watched until active ------------------------------------------
    _go(tab, "Launch instance", "Launch an instance")
    tab.get_by_label(re.compile(r"h100-mig-3g40")).check()
    tab.get_by_role("button", name="Next").click()
    tab.get_by_label(re.compile(r"^Name")).fill("notebook")
    tab.get_by_role("combobox", name=re.compile(r"^Image")).click()
    tab.get_by_role("option", name=re.compile("ubuntu-24-04")).click()
    tab.get_by_label(re.compile(r"^laptop")).check()
    tab.get_by_role("button", name="Next").click()
    tab.get_by_role("combobox", name="Subnet").click()
    tab.get_by_role("option", name=re.compile(r"^gpu \(10\.40\.1\.0\/24\)")).click()
    tab.get_by_role("combobox", name="Security groups").click()
    tab.get_by_role("option", name="ssh", exact=True).click()
    tab.keyboard.press("Escape")
    check_a11y(tab, "journey: launch network")
    shot(tab, "launch-network")
    tab.get_by_role("button", name="Next").click()
    expect(tab.get_by_test_id("placement-check")).to_contain_text("Can be placed now", timeout=30_000)
    expect(tab.get_by_test_id("price")).to_contain_text("$0.99 per hour")
    tab.get_by_role("button", name="Launch", exact=True).click()
    expect(tab).to_have_url(re.compile(r"/instances/[0-9a-f-]{36}$"))
    instance_id = tab.url.rsplit("/", 1)[1]
    instance_url = tab.url
    expect(tab.get_by_test_id("status")).to_have_text("active", timeout=ACTIVE_TIMEOUT_MS)
    vm = a.api.get(f"instances/{instance_id}").json()
    assert vm["status"] == "active" and len(vm["ports"]) == 1, vm
    assert vm["ports"][0]["security_groups"] == [groups["ssh"]["id"]], vm["ports"]
    expect(tab.get_by_text(vm["ports"][0]["fixed_ips"][0])).to_be_visible()

    # --- a health event on its GPU: the operator's agent reports an XID; the tenant sees it from the instance ----
    agent = stack.agents.agents[MIG_HOST]
    observed = dt.datetime.now(dt.UTC).replace(microsecond=0)
    for gpu in cat.ops.all("gpus", host=MIG_HOST):
        agent.cp.health_event({"kind": "xid", "xid": 13, "gpu_index": gpu["index"], "dedup_key": f"journey-{gpu['index']}",
                               "observed_at": observed.isoformat(), "message": "graphics engine exception"})
    tab.get_by_role("link", name="Health events of notebook").click()
    expect(tab.get_by_role("heading", name="Health events of notebook")).to_be_visible()
    event = tab.get_by_test_id("health-event")
    expect(event).to_have_count(1)      # one of the host's GPUs is this instance's
    expect(event).to_contain_text("Application error")
    expect(event).to_contain_text("XID 13")
    expect(event.get_by_role("link", name="notebook")).to_have_attribute("href", f"/instances/{instance_id}")
    check_a11y(tab, "health events")
    shot(tab, "health-events")

    # --- a 2-node cluster: active only once both members are ---------------------------------------------------
    _go(tab, "Clusters", "Clusters")
    tab.get_by_label(re.compile(r"^Name")).fill("train")
    tab.get_by_role("combobox", name="Flavor").click()
    tab.get_by_role("option", name=re.compile(r"^h100-8x")).click()
    tab.get_by_role("combobox", name="Image").click()
    tab.get_by_role("option", name=re.compile(r"^ubuntu-24-04")).click()
    tab.get_by_label(re.compile(r"^Size")).fill("2")
    tab.get_by_role("button", name="Create cluster").click()
    tab.get_by_role("table", name="Clusters").get_by_role("link", name="train").click()
    expect(tab.get_by_role("heading", name="train")).to_be_visible()
    members = tab.get_by_test_id("member")
    expect(members).to_have_count(2, timeout=60_000)
    header_status = tab.get_by_test_id("status").first
    # while a member is still being created the cluster does not say active
    seen = []
    def cluster_and_members():
        cluster = a.api.get(f"clusters/{tab.url.rsplit('/', 1)[1]}").json()
        statuses = [a.api.get(f"instances/{m}").json()["status"] for m in cluster["members"]]
        seen.append((cluster["status"], statuses))
        assert not (cluster["status"] == "active" and set(statuses) != {"active"}), seen[-1]
        return cluster["status"] == "active"
    poll(cluster_and_members, timeout=CLUSTER_TIMEOUT_MS / 1000, interval=1, what="the cluster to become active")
    expect(header_status).to_have_text("active", timeout=5_000)
    expect(members.get_by_test_id("status").filter(has_text="active")).to_have_count(2)
    assert any(status == "pending" for status, _ in seen), seen    # it was seen pending before active
    check_a11y(tab, "journey: cluster detail")
    shot(tab, "cluster-detail-active")
    cluster_url = tab.url

    # --- a lease, on the calendar ----------------------------------------------------------------------------
    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = today + dt.timedelta(days=7 - today.weekday(), hours=9)       # next Monday 09:00 UTC
    end = start + dt.timedelta(days=2)
    _go(tab, "Leases", "Leases")
    tab.get_by_label(re.compile(r"^Name")).fill("finetune")
    tab.get_by_label(re.compile(r"^GPUs")).fill("8")
    tab.get_by_label(re.compile(r"^Start")).fill(start.strftime("%Y-%m-%dT%H:%M"))
    tab.get_by_label(re.compile(r"^End")).fill(end.strftime("%Y-%m-%dT%H:%M"))
    tab.get_by_label(re.compile(r"^Time zone")).fill("UTC")
    tab.get_by_role("button", name="Request lease").click()
    bar = tab.get_by_test_id("lease-calendar").get_by_test_id("calendar-lease").filter(has_text="finetune")
    expect(bar).to_contain_text(f"8 × {WHOLE_FLAVOR['gpu_model']} GPUs, confirmed", timeout=30_000)
    leases = [x for x in a.api.all("leases", project=a.project["id"]) if x["status"] == "confirmed"]
    assert [(x["name"], x["count"]) for x in leases] == [("finetune", 8)]
    check_a11y(tab, "journey: leases calendar")
    shot(tab, "lease-calendar")

    # --- the month's usage grows ------------------------------------------------------------------------------
    period = dt.datetime.now(dt.UTC).strftime("%Y-%m")

    def preview_total() -> Decimal:
        return Decimal(a.api.get("invoices/preview", params={"organization": a.org["id"]}).json()["total"])

    def billed_more(than: Decimal):
        _invoice_run(cat.billing, period, finalize=False)
        total = preview_total()
        return total if total > than else None

    first = poll(lambda: billed_more(Decimal(0)), timeout=240, interval=5, what="usage on the month to date")
    _go(tab, "Billing", "Billing")
    box = tab.get_by_test_id("month-to-date")
    expect(box.get_by_test_id("total")).to_have_text(f"${first:,.2f}")
    charges = tab.get_by_role("table", name="Month-to-date charges")
    expect(charges.get_by_test_id("invoice-line").filter(has_text="Instance")).not_to_have_count(0)
    second = poll(lambda: billed_more(first), timeout=240, interval=5, what="the month to date to grow")
    tab.reload()
    expect(box.get_by_test_id("total")).to_have_text(f"${second:,.2f}")
    assert second > first
    line = charges.get_by_test_id("invoice-line").filter(has_text="h100-mig-3g40")
    expect(line).to_contain_text(re.compile(r"Instance [0-9a-f]{8} \(h100-mig-3g40\), on demand"))
    check_a11y(tab, "journey: billing with usage")
    shot(tab, "billing-usage")

    # --- an invoice PDF (last month's, finalized by the billing admin) ----------------------------------------------
    last_month = (today.replace(day=1) - dt.timedelta(days=1)).strftime("%Y-%m")
    cat.billing.post("adjustments", {"organization": a.org["id"], "period": last_month, "amount": "120.00",
                                     "description": "Onboarding and migration support"}, expect=201)
    _invoice_run(cat.billing, last_month, finalize=True)
    tab.reload()
    invoice_link = tab.get_by_role("table", name="Invoices").get_by_role("link", name=re.compile(r"^INV-"))
    expect(invoice_link).to_have_count(1)
    invoice_link.click()
    expect(tab.get_by_role("heading", name=re.compile(r"INV-"))).to_be_visible()
    expect(tab.get_by_test_id("invoice-line").filter(has_text="Onboarding and migration support")).to_have_count(1)
    check_a11y(tab, "journey: invoice")
    shot(tab, "invoice-detail")
    with tab.expect_download() as download:
        tab.get_by_role("link", name="Download PDF").click()
    pdf = download.value
    body = open(pdf.path(), "rb").read()
    assert body.startswith(b"%PDF-") and b"%%EOF" in body[-1024:], body[:64]
    assert pdf.suggested_filename.endswith(".pdf")

    # --- an API token: created (secret once), then revoked -----------------------------------------------------
    _go(tab, "API tokens", "API tokens")
    tab.get_by_label(re.compile(r"^Name")).fill("ci")
    tab.get_by_role("button", name="Create token").click()
    secret = tab.get_by_test_id("token-secret")
    expect(secret).to_contain_text(re.compile(r"^gpc_"))
    holder = Api(base, secret.inner_text().strip())
    assert holder.get("projects").json()["results"][0]["id"] == a.project["id"]
    token_row = tab.get_by_role("row", name=re.compile(r"\bci\b"))
    tab.get_by_role("button", name="Revoke token ci").click()
    tab.get_by_role("dialog").get_by_role("button", name="Revoke").click()
    expect(token_row).to_contain_text("revoked")
    holder.get("projects", expect=401)

    # --- a member invited as viewer: accepts the e-mailed link, signs in, cannot launch ------------------------
    viewer = "analyst@meridian.example"
    _go(tab, "Members", "Members")
    tab.get_by_label(re.compile(r"^E-mail")).fill(viewer)
    tab.get_by_role("combobox", name="Role", exact=True).click()
    tab.get_by_role("option", name="viewer", exact=True).click()
    tab.get_by_role("button", name="Send invitation").click()
    expect(tab.get_by_role("table", name="Invitations").get_by_role("row", name=re.compile(viewer))).to_contain_text(
        "pending")
    guest = _new_page(browser)
    try:
        guest.goto(f"{base}/invitations/accept?token={stack.invitation_token(viewer)}")
        expect(guest.get_by_text("You are invited to")).to_contain_text("Meridian")
        expect(guest.get_by_text("You are invited to")).to_contain_text("viewer")
        shot(guest, "invitation-accept")
        guest.get_by_label("Full name").fill("Ana Lyst")
        guest.get_by_label("Password").fill(PASSWORD)
        guest.get_by_role("button", name="Accept the invitation").click()
        expect(guest.get_by_text("You joined")).to_contain_text("as viewer")
        guest.goto(f"{base}/sign-in")
        guest.get_by_label("E-mail").fill(viewer)
        guest.get_by_label(re.compile(r"^Password")).fill(PASSWORD)
        guest.get_by_role("button", name="Sign in").click()
        expect(guest.get_by_role("heading", name="Dashboard")).to_be_visible()
        expect(guest.get_by_test_id("read-only")).to_be_visible()
        guest.get_by_role("link", name="Instances", exact=True).click()
        expect(guest.get_by_role("row", name=re.compile("notebook"))).to_be_visible()
        guest.goto(f"{base}/instances/new")
        guest.get_by_label(re.compile(r"h100-mig-3g40")).check()
        guest.get_by_role("button", name="Next").click()
        guest.get_by_label(re.compile(r"^Name")).fill("sneaky")
        guest.get_by_role("combobox", name=re.compile(r"^Image")).click()
        guest.get_by_role("option", name=re.compile("ubuntu-24-04")).click()
        guest.get_by_role("button", name="Next").click()
        guest.get_by_role("button", name="Next").click()
        expect(guest.get_by_text("Your role in this project is read-only: you cannot launch.")).to_be_visible()
        expect(guest.get_by_role("button", name="Launch", exact=True)).to_be_disabled()
        check_a11y(guest, "journey: viewer launch")
        shot(guest, "viewer-cannot-launch")
        assert [i["name"] for i in a.api.all("instances", project=a.project["id"])
                if i["name"] == "sneaky"] == []
    finally:
        guest.context.close()
    tab.reload()
    expect(tab.get_by_role("combobox", name=f"Role of {viewer} (organization)")).to_have_value("viewer")

    # --- a second tenant sees none of it; the first tenant's URLs are "not found" ------------------------------
    b = tenant(stack, cat.ops, "tundra", "owner@tundra.example")
    other = _new_page(browser)
    try:
        sign_in(other, base, b.email)
        for nav, empty in (("Instances", "No instances yet"), ("Clusters", "No clusters yet"),
                           ("Networking", "No VPCs yet"), ("Leases", "No leases yet"), ("SSH keys", "No SSH keys yet")):
            other.get_by_role("link", name=nav, exact=True).click()
            expect(other.get_by_test_id("empty-state")).to_contain_text(empty)
        other.get_by_role("link", name="Health events").click()
        expect(other.get_by_test_id("empty-state")).to_contain_text("No health events")
        for url, name in ((instance_url, "notebook"), (cluster_url, "train"), (vpc_url, "prod")):
            other.goto(url)
            expect(other.get_by_role("heading", name="Not found")).to_be_visible()
            expect(other.get_by_role("heading", name=name)).to_have_count(0)
        check_a11y(other, "journey: second tenant not found")
        shot(other, "second-tenant-not-found")
    finally:
        other.context.close()
    tab.context.close()
