"""The organization's administration in the web console, in a real browser against the real stack: a tenant
creates an API token and sees its secret once (then never again) and revokes it; invites a member and changes a
role; finds the token's creation in the audit log; creates a cluster and sees it listed with its members. Each
step is one test; they share the state (`A`) and run in file order; a failed step skips the later ones."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from playwright.sync_api import expect

from tests.e2e.stack import Api, poll

from .conftest import check_a11y, shot
from .test_console import sign_in
from .world import catalog, tenant

pytestmark = pytest.mark.e2e

A = SimpleNamespace()


@pytest.fixture(scope="module")
def world(console_stack):
    A.stack = console_stack
    A.base = console_stack.base
    A.ops = Api(console_stack.base, console_stack.ops_token)
    A.a = tenant(console_stack, A.ops, "keel", "owner@keel.example")
    A.follower = None
    try:
        yield A
    finally:
        if A.follower is not None:
            A.follower.set()


@pytest.fixture
def a(request, world):
    failed = request.module.__dict__.get("_FAILED_STEPS")
    if failed:
        pytest.skip(f"an earlier step failed: {failed[0]}")
    return A


@pytest.fixture(scope="module")
def tab(browser, world):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def test_1_api_token_secret_shown_once(a, tab):
    sign_in(tab, a.base, a.a.email)
    tab.get_by_role("link", name="API tokens").click()
    expect(tab.get_by_test_id("empty-state")).to_contain_text("No API tokens yet")
    tab.get_by_label(re.compile(r"^Name")).fill("terraform-ci")
    tab.get_by_role("combobox", name="Scope", exact=True).click()
    tab.get_by_role("option", name="write").click()
    tab.get_by_role("button", name="Create token").click()
    secret = tab.get_by_test_id("token-secret")
    expect(secret).to_contain_text(re.compile(r"^gpc_"))
    expect(tab.get_by_test_id("new-token")).to_contain_text("you will not see it again")
    value = secret.inner_text().strip()
    row = tab.get_by_role("row", name=re.compile("terraform-ci"))
    expect(row).to_contain_text("write")
    expect(row).to_contain_text("project Research")
    check_a11y(tab, "api tokens")
    shot(tab, "api-tokens", mask=[secret])
    # the secret works, and the API keeps only its prefix: it is not in the list, nor on the page after a reload
    holder = Api(a.base, value)
    assert holder.get("projects").json()["results"][0]["id"] == a.a.project["id"]
    tokens = a.a.api.get("tokens", params={"user_email": a.a.email}).json()["results"]
    assert [(t["name"], t["scope"], t["project"]) for t in tokens] == [("terraform-ci", "write", a.a.project["id"])]
    assert value not in str(tokens) and value.startswith(f"gpc_{tokens[0]['prefix']}_")
    tab.reload()
    expect(row).to_be_visible()
    expect(tab.get_by_test_id("token-secret")).to_have_count(0)
    assert value not in tab.content()
    a.token = tokens[0]
    tab.get_by_role("button", name="Revoke token terraform-ci").click()
    tab.get_by_role("dialog").get_by_role("button", name="Revoke").click()
    expect(row).to_contain_text("revoked")
    holder.get("projects", expect=401)


def test_2_invite_a_member_and_change_a_role(a, tab):
    tab.get_by_role("link", name="Members").click()
    owner = tab.get_by_role("table", name="Members").get_by_role("row", name=re.compile(re.escape(a.a.email)))
    expect(owner).to_contain_text("organization")
    expect(tab.get_by_role("combobox", name=f"Role of {a.a.email} (organization)")).to_have_value("owner")
    tab.get_by_label(re.compile(r"^E-mail")).fill("dev@keel.example")
    tab.get_by_role("button", name="Send invitation").click()
    invitation = tab.get_by_role("table", name="Invitations").get_by_role("row", name=re.compile("dev@keel.example"))
    expect(invitation).to_contain_text("pending")
    expect(invitation).to_contain_text("member")
    pending = a.a.api.get("invitations", params={"organization": a.a.org["id"], "email": "dev@keel.example"}).json()["results"]
    assert [(i["email"], i["role"], i["status"]) for i in pending] == [("dev@keel.example", "member", "pending")]
    # the invitee accepts; an owner changes the new member's role to viewer
    Api(a.base).post("invitations/accept", {"token": a.stack.invitation_token("dev@keel.example"),
                                             "password": "correct horse battery staple"}, expect=(200, 201))
    tab.reload()
    role = tab.get_by_role("combobox", name="Role of dev@keel.example (organization)")
    expect(role).to_have_value("member")
    role.click()
    tab.get_by_role("option", name="viewer", exact=True).click()
    expect(role).to_have_value("viewer")
    poll(lambda: [m["role"] for m in a.a.api.get("memberships", params={
        "organization": a.a.org["id"], "user_email": "dev@keel.example"}).json()["results"]] == ["viewer"],
         timeout=15, what="the new member's role changed to viewer")
    check_a11y(tab, "members")
    shot(tab, "members")


def test_3_audit_log_shows_the_token_creation(a, tab):
    tab.get_by_role("link", name="Audit log").click()
    events = tab.get_by_test_id("audit-event")
    expect(events.first).to_be_visible()
    tab.get_by_label(re.compile(r"^Action")).fill("api_token.")
    tab.get_by_role("button", name="Apply filters").click()
    # a named object reads by its name with the end of its id (the whole id in the cell's title)
    created = events.filter(has_text="api_token.create").filter(has_text=a.token["id"][-8:])
    expect(created).to_have_count(1)
    expect(created).to_contain_text(a.a.email)
    expect(created).to_contain_text("identity.apitoken")
    expect(events.filter(has_text="api_token.revoke")).to_have_count(1)
    expect(events.filter(has_text="invitation")).to_have_count(0)
    check_a11y(tab, "audit log")
    shot(tab, "audit-log")


def test_4_a_viewer_sees_member_actions_disabled(a, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        sign_in(page, a.base, "dev@keel.example")
        page.goto(f"{a.base}/members")
        members = page.get_by_role("table", name="Members")
        expect(members.get_by_role("row", name=re.compile(re.escape(a.a.email)))).to_be_visible()
        expect(page.get_by_role("button", name="Send invitation")).to_be_disabled()
        expect(page.get_by_role("button", name=f"Remove {a.a.email} (organization)")).to_be_disabled()
        expect(page.get_by_role("combobox", name=f"Role of {a.a.email} (organization)")).to_be_disabled()
        check_a11y(page, "members (viewer)")
    finally:
        context.close()


def test_5_create_a_cluster_and_see_its_members(a, tab):
    cat = catalog(a.stack)
    a.follower = cat.follower
    tab.goto(f"{a.base}/clusters")
    expect(tab.get_by_test_id("empty-state")).to_contain_text("No clusters yet")
    tab.get_by_label(re.compile(r"^Name")).fill("train")
    tab.get_by_role("combobox", name="Flavor").click()
    tab.get_by_role("option", name=re.compile(r"^h100-8x")).click()
    tab.get_by_role("combobox", name="Image").click()
    tab.get_by_role("option", name=re.compile(r"^ubuntu-24-04")).click()
    tab.get_by_label(re.compile(r"^Size")).fill("2")
    tab.get_by_role("button", name="Create cluster").click()
    row = tab.get_by_role("table", name="Clusters").get_by_role("row", name=re.compile("train"))
    expect(row).to_contain_text("h100-8x")
    clusters = a.a.api.get("clusters", params={"project": a.a.project["id"]}).json()["results"]
    assert [(c["name"], c["size"], c["flavor"]) for c in clusters] == [("train", 2, cat.flavor_8x["id"])]
    check_a11y(tab, "clusters")
    shot(tab, "clusters")
    tab.get_by_role("link", name="train").click()
    expect(tab.get_by_role("heading", name="train")).to_be_visible()
    members = tab.get_by_test_id("member")
    expect(members).to_have_count(2, timeout=60_000)
    expect(members.get_by_test_id("status")).to_have_count(2)
    check_a11y(tab, "cluster detail")
    shot(tab, "cluster-detail")
