"""Networking in the web console, in a real browser against the real stack: a tenant creates a VPC (after a
refused CIDR) and a subnet and sees them listed; a subnet overlapping it and one with its name are refused (the
server's message on the CIDR field, then on the form; nothing made); sees the default security group's rules, adds
and removes a rule, is refused a malformed one on its field, allocates a floating IP from the operator's pool, associates it with a port and releases it; creates an
InfiniBand partition on the provider's fabric (after a refused fabric name) and sees it listed; a viewer sees the
write actions disabled. Each step is one test; they share the state (`N`) and run in file order; a failed step
skips the later ones."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from playwright.sync_api import expect

from tests.e2e.stack import ROOT, Api

from .conftest import check_a11y, shot
from .test_console import sign_in
from .world import PASSWORD, invite, tenant

pytestmark = pytest.mark.e2e

N = SimpleNamespace()


@pytest.fixture(scope="module")
def world(console_stack):
    N.stack = console_stack
    N.base = console_stack.base
    N.ops = Api(console_stack.base, console_stack.ops_token)
    N.a = tenant(console_stack, N.ops, "harbor", "owner@harbor.example")
    return N


@pytest.fixture
def n(request, world):
    failed = request.module.__dict__.get("_FAILED_STEPS")
    if failed:
        pytest.skip(f"an earlier step failed: {failed[0]}")
    return N


@pytest.fixture(scope="module")
def tab(browser, world):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def test_1_create_a_vpc(n, tab):
    sign_in(tab, n.base, n.a.email)
    tab.get_by_role("link", name="Networking").click()
    expect(tab.get_by_test_id("empty-state")).to_contain_text("No VPCs yet")
    check_a11y(tab, "networking (empty)")
    tab.get_by_label(re.compile(r"^Name")).fill("prod")
    tab.get_by_label(re.compile(r"^IPv4 CIDR")).fill("8.8.0.0/16")          # public: refused by the API
    tab.get_by_role("button", name="Create VPC").click()
    expect(tab.get_by_role("alert").first).to_be_visible()
    expect(tab.locator("[aria-invalid=true]")).to_have_count(1)
    expect(tab.get_by_label(re.compile(r"^Name"))).to_have_value("prod")
    tab.get_by_label(re.compile(r"^IPv4 CIDR")).fill("10.20.0.0/16")
    tab.get_by_role("button", name="Create VPC").click()
    row = tab.get_by_role("row", name=re.compile("prod"))
    expect(row).to_contain_text("10.20.0.0/16")
    expect(tab.get_by_label(re.compile(r"^Name"))).to_have_value("")
    check_a11y(tab, "networking")
    shot(tab, "networking")
    vpcs = n.a.api.get("vpcs", params={"project": n.a.project["id"]}).json()["results"]
    assert [(v["name"], v["cidr"]) for v in vpcs] == [("prod", "10.20.0.0/16")]
    n.vpc = vpcs[0]


def test_2_add_a_subnet(n, tab):
    tab.get_by_role("link", name="prod").click()
    expect(tab.get_by_role("heading", name="prod")).to_be_visible()
    expect(tab.get_by_test_id("empty-state")).to_contain_text("No subnets yet")
    tab.get_by_label(re.compile(r"^Name")).fill("web")
    tab.get_by_label(re.compile(r"^CIDR")).fill("10.20.1.0/24")
    tab.get_by_label(re.compile(r"^DNS servers")).fill("1.1.1.1, 9.9.9.9")
    tab.get_by_role("button", name="Add subnet").click()
    row = tab.get_by_role("row", name=re.compile("web"))
    expect(row).to_contain_text("10.20.1.0/24")
    expect(row).to_contain_text("10.20.1.1")                # the default gateway: the first host
    expect(row).to_contain_text("1.1.1.1, 9.9.9.9")
    check_a11y(tab, "vpc: subnets")
    shot(tab, "vpc-subnets")
    subnets = n.a.api.get("subnets", params={"vpc": n.vpc["id"]}).json()["results"]
    assert [(s["name"], s["cidr"], s["gateway_ip"]) for s in subnets] == [("web", "10.20.1.0/24", "10.20.1.1")]
    n.subnet = subnets[0]


def test_2b_an_overlapping_cidr_and_a_taken_name_are_refused_and_nothing_is_left(n, tab):
    before = n.a.api.get("subnets", params={"vpc": n.vpc["id"]}).json()["results"]
    name, cidr = tab.get_by_label(re.compile(r"^Name")), tab.get_by_label(re.compile(r"^CIDR"))
    name.fill("db")
    cidr.fill("10.20.1.128/25")                              # inside "web" (10.20.1.0/24)
    tab.get_by_role("button", name="Add subnet").click()
    expect(cidr).to_have_attribute("aria-invalid", "true")    # the field the server's `errors` names
    message = n.a.api.post("subnets", {"vpc": n.vpc["id"], "name": "db2", "cidr": "10.20.1.128/25"},
                           expect=400).json()
    assert message["code"] == "subnet_overlap" and list(message["errors"]) == ["cidr"], message
    expect(cidr).to_have_accessible_description(re.compile(re.escape(message["errors"]["cidr"][0])))
    expect(name).not_to_have_attribute("aria-invalid", "true")
    expect(name).to_have_value("db")                          # the form keeps what was typed
    expect(cidr).to_have_value("10.20.1.128/25")
    check_a11y(tab, "vpc: subnet refused (overlap)")
    shot(tab, "vpc-subnet-overlap")
    cidr.fill("10.20.2.0/24")
    name.fill("web")                                          # taken in this VPC: 409 name_taken, on the panel
    tab.get_by_role("button", name="Add subnet").click()
    problem = tab.get_by_test_id("problem")
    expect(problem).to_contain_text("The subnet was not added")
    expect(problem).to_contain_text("A subnet named 'web' exists in this VPC.")
    expect(cidr).not_to_have_attribute("aria-invalid", "true")   # the earlier refusal is gone
    expect(name).to_have_value("web")
    expect(cidr).to_have_value("10.20.2.0/24")
    after = n.a.api.get("subnets", params={"vpc": n.vpc["id"]}).json()["results"]
    assert [(s["id"], s["cidr"]) for s in after] == [(s["id"], s["cidr"]) for s in before]
    assert n.a.api.get("ports", params={"vpc": n.vpc["id"]}).json()["results"] == []
    name.fill("")
    cidr.fill("")


def test_3_security_group_rules(n, tab):
    tab.get_by_role("tab", name="Security groups").click()
    group = tab.get_by_test_id("sg-default")
    rules = group.get_by_test_id("rule")
    default = n.a.api.get("security-groups", params={"vpc": n.vpc["id"]}).json()["results"]
    assert [g["name"] for g in default] == ["default"] and default[0]["rules"]
    expect(rules).to_have_count(len(default[0]["rules"]))      # the default group's rules, as the API has them
    expect(group).to_contain_text("egress")
    expect(tab.get_by_role("combobox", name="Protocol (default)")).to_have_value("TCP")
    tab.get_by_label("From port (default)").fill("22")
    tab.get_by_label("Remote prefix (default)").fill("198.51.100.0/24")
    tab.get_by_role("button", name="Add rule to default").click()
    ssh = rules.filter(has_text="tcp 22").filter(has_text="198.51.100.0/24")
    expect(ssh).to_have_count(1)
    expect(rules).to_have_count(len(default[0]["rules"]) + 1)
    check_a11y(tab, "vpc: security groups")
    shot(tab, "vpc-security-groups")
    tab.get_by_role("button", name="Remove rule ingress tcp 22 from default").click()
    tab.get_by_role("dialog").get_by_role("button", name="Remove").click()
    expect(ssh).to_have_count(0)
    after = n.a.api.get("security-groups", params={"vpc": n.vpc["id"]}).json()["results"][0]["rules"]
    assert sorted(r["id"] for r in after) == sorted(r["id"] for r in default[0]["rules"])


def test_3b_a_malformed_rule_is_refused_on_its_field(n, tab):
    group = n.a.api.get("security-groups", params={"vpc": n.vpc["id"]}).json()["results"][0]
    port, remote = tab.get_by_label("From port (default)"), tab.get_by_label("Remote prefix (default)")
    port.fill("443")
    remote.fill("10.0.0.300/24")                              # not an IP prefix
    tab.get_by_role("button", name="Add rule to default").click()
    expect(remote).to_have_attribute("aria-invalid", "true")
    expect(remote).to_have_accessible_description(re.compile(re.escape("'10.0.0.300/24' is not an IP prefix.")))
    expect(port).to_have_value("443")
    expect(remote).to_have_value("10.0.0.300/24")
    check_a11y(tab, "vpc: rule refused")
    shot(tab, "vpc-rule-refused")
    after = n.a.api.get(f"security-groups/{group['id']}").json()["rules"]
    assert sorted(r["id"] for r in after) == sorted(r["id"] for r in group["rules"])   # nothing added
    remote.fill("")
    port.fill("")


def test_4_floating_ip_allocate_associate_release(n, tab):
    n.ops.post("public-ip-pools", {"name": "public", "cidr": "203.0.113.0/24", "first_ip": "203.0.113.10",
                                   "last_ip": "203.0.113.250", "gateway_ip": "203.0.113.1",
                                   "network_name": "physnet-public"}, expect=201)
    port = n.a.api.post("ports", {"subnet": n.subnet["id"], "name": "vip"}, expect=201).json()
    tab.reload()
    tab.get_by_role("tab", name="Floating IPs").click()
    expect(tab.get_by_test_id("empty-state")).to_contain_text("No floating IPs")
    tab.get_by_role("combobox", name="Pool").click()
    tab.get_by_role("option", name=re.compile("public")).click()
    tab.get_by_role("button", name="Allocate").click()
    table = tab.get_by_role("table", name="Floating IPs")
    floating = table.get_by_role("row", name=re.compile("floating"))
    expect(floating).to_have_count(1)
    ips = n.a.api.get("public-ips", params={"vpc": n.vpc["id"], "kind": "floating"}).json()["results"]
    assert len(ips) == 1 and ips[0]["port"] is None
    address = ips[0]["address"]
    tab.get_by_role("combobox", name=f"Port of {address}").click()
    tab.get_by_role("option", name=re.compile(r"10\.20\.1\.\d+ · vip")).click()
    expect(tab.get_by_role("combobox", name=f"Port of {address}")).to_have_value(re.compile("vip"))
    assert n.a.api.get(f"public-ips/{ips[0]['id']}").json()["port"] == port["id"]
    check_a11y(tab, "vpc: floating IPs")
    shot(tab, "vpc-floating-ips")
    tab.get_by_role("button", name=f"Release {address}").click()
    tab.get_by_role("dialog").get_by_role("button", name="Release").click()
    expect(floating).to_have_count(0)
    assert n.a.api.get("public-ips", params={"vpc": n.vpc["id"], "kind": "floating"}).json()["results"] == []


def test_5_create_an_infiniband_partition(n, tab):
    sample = (ROOT / "apps/inventory/fleets/sample.yaml").read_text()        # the fleet's fabric ib-compute
    n.ops.post("fleet/import", {"document": sample, "dry_run": False}, expect=(200, 201))
    n.ops.post("pkey-pools", {"fabric": "ib-compute", "first_pkey": "0x0100", "last_pkey": "0x01ff"},
               expect=(200, 201))
    tab.goto(f"{n.base}/networking")
    tab.get_by_role("tab", name="InfiniBand partitions").click()
    expect(tab.get_by_test_id("empty-state")).to_contain_text("No InfiniBand partitions yet")
    tab.get_by_label(re.compile(r"^Partition name")).fill("train")
    fabric = tab.get_by_role("combobox", name=re.compile(r"^Fabric"))
    fabric.fill("ib-nowhere")                                                 # no such fabric: refused on the field
    tab.get_by_role("button", name="Create partition").click()
    expect(fabric).to_have_attribute("aria-invalid", "true")
    expect(tab.get_by_label(re.compile(r"^Partition name"))).to_have_value("train")
    fabric.fill("ib-compute")
    tab.keyboard.press("Escape")
    tab.get_by_role("button", name="Create partition").click()
    row = tab.get_by_role("row", name=re.compile("train"))
    expect(row).to_contain_text("ib-compute")
    expect(row).to_contain_text("0x0100")                                     # the first P_Key of the pool
    expect(tab.get_by_text(re.compile("No members yet"))).to_be_visible()
    check_a11y(tab, "networking: InfiniBand partitions")
    shot(tab, "ib-partitions")
    parts = n.a.api.get("ib-partitions", params={"project": n.a.project["id"]}).json()["results"]
    assert [(p["name"], p["fabric"], p["pkey_hex"], p["members"]) for p in parts] == [
        ("train", "ib-compute", "0x0100", [])]


def test_6_a_viewer_sees_networking_writes_disabled(n, browser):
    invite(n.stack, n.a.api, n.a.org, "auditor@harbor.example", "viewer")
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        sign_in(page, n.base, "auditor@harbor.example")
        page.goto(f"{n.base}/networking")
        expect(page.get_by_role("row", name=re.compile("prod"))).to_be_visible()
        expect(page.get_by_role("button", name="Create VPC")).to_be_disabled()
        expect(page.get_by_role("button", name="Delete VPC prod")).to_be_disabled()
        page.get_by_role("tab", name="InfiniBand partitions").click()
        expect(page.get_by_role("button", name="Delete partition train")).to_be_disabled()
        expect(page.get_by_role("button", name="Create partition")).to_be_disabled()
        page.goto(f"{n.base}/networking/vpcs/{n.vpc['id']}")
        expect(page.get_by_role("button", name="Delete subnet web")).to_be_disabled()
        page.get_by_role("tab", name="Security groups").click()
        expect(page.get_by_role("button", name="Add rule to default")).to_be_disabled()
        check_a11y(page, "networking (viewer)")
    finally:
        context.close()


def test_7_a_session_that_ends_mid_form_signs_in_again_over_the_form(n, tab):
    """The session ends (its cookies gone, as when it expires) while the owner fills in a subnet: the submit asks
    for a sign-in in a dialog over the form instead of a trip to the sign-in page, the sign-in works at once (no
    "CSRF cookie not set": the console fetches a fresh CSRF cookie), the refusal the ended session caused is gone,
    and the form still holds what was typed, so the second submit adds the subnet."""
    tab.goto(f"{n.base}/networking/vpcs/{n.vpc['id']}")
    name, cidr = tab.get_by_label(re.compile(r"^Name")), tab.get_by_label(re.compile(r"^CIDR"))
    name.fill("late")
    cidr.fill("10.20.9.0/24")
    tab.context.clear_cookies()
    tab.get_by_role("button", name="Add subnet").click()
    dialog = tab.get_by_role("dialog", name="Sign in again")
    expect(dialog.get_by_role("heading", name="Your session has ended")).to_be_visible()
    expect(tab).to_have_url(re.compile(rf"/networking/vpcs/{n.vpc['id']}$"))       # still on the form's screen
    expect(dialog.get_by_label("E-mail")).to_have_value(n.a.email)
    dialog.get_by_label(re.compile(r"^Password")).fill(PASSWORD)
    check_a11y(tab, "session ended: sign in again")
    shot(tab, "session-ended")
    dialog.get_by_role("button", name="Sign in").click()
    expect(dialog).to_have_count(0)
    expect(tab.get_by_text("CSRF")).to_have_count(0)
    # the refusal the ended session caused is gone with it (it said "Authentication credentials were not provided.")
    expect(tab.get_by_text("Authentication credentials were not provided")).to_have_count(0)
    expect(tab.get_by_text("The subnet was not added")).to_have_count(0)
    expect(name).to_have_value("late")
    expect(cidr).to_have_value("10.20.9.0/24")
    tab.get_by_role("button", name="Add subnet").click()
    expect(tab.get_by_role("row", name=re.compile("late"))).to_contain_text("10.20.9.0/24")
    subnets = n.a.api.get("subnets", params={"vpc": n.vpc["id"]}).json()["results"]
    assert sorted(s["name"] for s in subnets) == ["late", "web"]
