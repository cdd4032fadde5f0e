"""The first project, in a real browser against the real stack: staff create an organization, its owner accepts the
invitation and signs in to a console with no project. The organization's screens (Members, API tokens, Billing,
Audit log) work without one; a plain member is told to ask an owner; the owner creates the first project from the
empty state and lands on its dashboard.
Each step is one test; they share the state (`F`) and run in file order; a failed step skips the later ones."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.stack import Api

from .conftest import check_a11y, shot
from .world import PASSWORD, invite, organization_owner

pytestmark = pytest.mark.e2e

F = SimpleNamespace()


@pytest.fixture(scope="module")
def world(console_stack):
    F.stack = console_stack
    F.base = console_stack.base
    F.ops = Api(console_stack.base, console_stack.ops_token)
    F.owner = organization_owner(console_stack, F.ops, "firstlight", "owner@firstlight.example")
    return F


@pytest.fixture
def f(request, world):
    failed = request.module.__dict__.get("_FAILED_STEPS")
    if failed:
        pytest.skip(f"an earlier step failed: {failed[0]}")
    return F


def sign_in_without_project(page: Page, base: str, email: str) -> None:
    page.goto(f"{base}/")
    expect(page).to_have_url(re.compile(r"/sign-in\?next=%2F$"))
    page.get_by_label("E-mail").fill(email)
    page.get_by_label(re.compile(r"^Password")).fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_test_id("empty-state")).to_be_visible()


def test_1_a_member_without_a_project_is_told_to_ask(f, browser):
    invite(f.stack, f.owner.api, f.owner.org, "engineer@firstlight.example", "member")
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        sign_in_without_project(page, f.base, "engineer@firstlight.example")
        expect(page.get_by_role("heading", name="No project yet")).to_be_visible()
        expect(page.get_by_test_id("empty-state")).to_contain_text("Ask an organization owner or admin to invite you")
        expect(page.get_by_role("button", name="Create project")).to_have_count(0)
    finally:
        context.close()


def test_2_the_owner_reaches_the_organization_screens_then_creates_the_first_project(f, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        sign_in_without_project(page, f.base, f.owner.email)
        empty = page.get_by_test_id("empty-state")
        expect(page.get_by_role("heading", name="Create your first project")).to_be_visible()
        expect(empty).to_contain_text("Firstlight has no project yet")
        # the organization's screens do not need a project; a project's screen keeps the empty state
        nav = page.get_by_role("navigation", name="Main")
        for link, heading in (("Members", "Members"), ("API tokens", "API tokens"), ("Billing", "Billing"),
                              ("Audit log", "Audit log")):
            nav.get_by_role("link", name=link, exact=True).click()
            expect(page.get_by_role("heading", name=heading, level=2)).to_be_visible()
            expect(page.get_by_test_id("empty-state").filter(has_text="Create your first project")).to_have_count(0)
        nav.get_by_role("link", name="Instances", exact=True).click()
        expect(page.get_by_role("heading", name="Create your first project")).to_be_visible()

        nav.get_by_role("link", name="Dashboard", exact=True).click()
        name = page.get_by_role("textbox", name=re.compile(r"^Project name"))
        name.fill("Research lab")
        expect(page.get_by_text("Its slug: research-lab")).to_be_visible()
        check_a11y(page, "first project")
        shot(page, "first-project")
        page.get_by_role("button", name="Create project").click()
        expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
        expect(page).to_have_url(re.compile(r"/$"))
        expect(page.get_by_test_id("empty-state").filter(has_text="Create your first project")).to_have_count(0)
        expect(page.get_by_test_id("project-switcher")).to_have_value("Research lab")
        expect(page.get_by_test_id("quota-use")).to_contain_text("Instances (organization)", timeout=30_000)
        expect(page.get_by_test_id("recent-health")).to_contain_text("No faults were seen")
        check_a11y(page, "first project's dashboard")
        shot(page, "first-project-dashboard")
        projects = f.owner.api.all("projects")
        assert [(p["slug"], p["name"]) for p in projects] == [("research-lab", "Research lab")]
    finally:
        context.close()
