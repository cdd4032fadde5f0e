"""Leases in the web console, in a real browser against the real stack (the sample fleet): a tenant asks for more
GPUs than the fleet has and sees the refusal, requests a lease of whole GPUs for a window next week and sees it
confirmed with its window (the form's check first says whether it can be confirmed, and refuses 16 GPUs over the
organization's quota of 12 before the request does), tries to end it before its start (the server's refusal on the End field), extends it by a
day and sees the new end, then cancels it after a confirmation; the project's on-demand queue is shown empty. Each step is one test; they share the state (`L`)
and run in file order; a failed step skips the later ones."""
from __future__ import annotations

import datetime as dt
import re
from types import SimpleNamespace

import pytest
from playwright.sync_api import expect

from tests.e2e.stack import ROOT, Api

from .conftest import check_a11y, shot
from .test_console import sign_in
from .world import WHOLE_FLAVOR, tenant

pytestmark = pytest.mark.e2e

L = SimpleNamespace()


@pytest.fixture(scope="module")
def world(console_stack):
    L.stack = console_stack
    L.base = console_stack.base
    L.ops = Api(console_stack.base, console_stack.ops_token)
    sample = (ROOT / "apps/inventory/fleets/sample.yaml").read_text()
    L.ops.post("fleet/import", {"document": sample, "dry_run": False}, expect=(200, 201))
    L.ops.post("flavors", WHOLE_FLAVOR, expect=201)     # the catalog's GPU model the form offers
    L.a = tenant(console_stack, L.ops, "atlas", "owner@atlas.example")
    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    L.start = today + dt.timedelta(days=7 - today.weekday(), hours=9)      # next Monday 09:00 UTC
    L.end = L.start + dt.timedelta(days=2)
    return L


@pytest.fixture
def lc(request, world):
    failed = request.module.__dict__.get("_FAILED_STEPS")
    if failed:
        pytest.skip(f"an earlier step failed: {failed[0]}")
    return L


@pytest.fixture(scope="module")
def tab(browser, world):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def _local(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M")


def test_1_request_a_lease(lc, tab):
    sign_in(tab, lc.base, lc.a.email)
    tab.get_by_role("link", name="Leases").click()
    expect(tab.get_by_test_id("empty-state")).to_contain_text("No leases yet")
    expect(tab.get_by_role("combobox", name="GPU model")).to_have_value(WHOLE_FLAVOR["gpu_model"])
    tab.get_by_label(re.compile(r"^Name")).fill("training")
    tab.get_by_label(re.compile(r"^GPUs")).fill("4000")                   # more than the whole fleet
    tab.get_by_label(re.compile(r"^Start")).fill(_local(lc.start))
    tab.get_by_label(re.compile(r"^End")).fill(_local(lc.end))
    tab.get_by_label(re.compile(r"^Time zone")).fill("UTC")
    tab.get_by_role("button", name="Request lease").click()
    expect(tab.get_by_role("alert").first).to_be_visible()
    expect(tab.get_by_label(re.compile(r"^Name"))).to_have_value("training")   # kept after the refusal
    # the organization may hold 12 GPUs at once: 16 fit the fleet but not the quota, and the check says so first
    quota = next(q for q in lc.ops.all("quotas", organization=lc.a.org["id"]) if q["resource"] == "gpus"
                 and q["project"] is None)
    lc.ops.patch(f"quotas/{quota['id']}", {"limit": 12})
    tab.get_by_label(re.compile(r"^GPUs")).fill("16")
    check = tab.get_by_test_id("lease-check")
    expect(check).to_contain_text("Would be refused")
    expect(check).to_contain_text("busiest moment of the window")
    expect(check.get_by_role("table", name="Quota this lease uses")).to_contain_text("exceeded")
    tab.get_by_role("button", name="Request lease").click()
    expect(tab.get_by_role("alert").first).to_contain_text("Quota exceeded: 12 GPUs allowed")
    assert lc.a.api.all("leases", project=lc.a.project["id"]) == []             # refused: nothing left behind
    tab.get_by_label(re.compile(r"^GPUs")).fill("8")
    expect(check).to_contain_text("Can be confirmed")
    shot(tab, "lease-check")
    tab.get_by_role("button", name="Request lease").click()
    confirmed = tab.get_by_test_id("lease-status").filter(has_text="confirmed")
    row = tab.get_by_role("row", name=re.compile("training")).filter(has=confirmed)
    expect(row).to_have_count(1)
    expect(row).to_contain_text(f"8 × {WHOLE_FLAVOR['gpu_model']} GPUs")
    check_a11y(tab, "leases")
    shot(tab, "leases")
    # in a narrow window the columns squeeze, and a status badge still shows its whole word (not "CONFIR…")
    tab.set_viewport_size({"width": 900, "height": 800})
    try:
        expect(confirmed).to_be_visible()
        cut = tab.evaluate("() => [...document.querySelectorAll('.mantine-Badge-label')]"
                           ".filter(e => e.scrollWidth > e.clientWidth).map(e => e.textContent)")
        assert cut == [], f"badges cut short: {cut}"
    finally:
        tab.set_viewport_size({"width": 1280, "height": 800})
    leases = [x for x in lc.a.api.all("leases", project=lc.a.project["id"]) if x["status"] == "confirmed"]
    assert [(x["name"], x["count"], x["kind"]) for x in leases] == [("training", 8, "gpus")]
    assert dt.datetime.fromisoformat(leases[0]["start"]) == lc.start
    assert dt.datetime.fromisoformat(leases[0]["end"]) == lc.end
    lc.lease = leases[0]


def test_2_extend_it(lc, tab):
    tab.get_by_role("button", name="Extend or shrink lease training").click()
    dialog = tab.get_by_role("dialog", name="Change the lease “training”")
    end = dialog.get_by_label(re.compile(r"^End"))
    expect(end).to_have_value(_local(lc.end))                              # the browser runs in UTC
    expect(dialog.get_by_role("button", name="Change lease")).to_be_disabled()   # nothing changes yet
    end.fill(_local(lc.start - dt.timedelta(hours=1)))                    # before the start: refused
    dialog.get_by_role("button", name="Shrink lease").click()
    expect(dialog.get_by_text("must be after start", exact=True)).to_be_visible()   # on the End field
    expect(end).to_have_value(_local(lc.start - dt.timedelta(hours=1)))  # kept
    new_end = lc.end + dt.timedelta(days=1)
    end.fill(_local(new_end))
    expect(dialog.get_by_test_id("lease-change-summary")).to_contain_text("Extends the lease by 1 d")
    check_a11y(tab, "lease change dialog")
    shot(tab, "lease-extend")
    dialog.get_by_role("button", name="Extend lease").click()
    expect(dialog).to_be_hidden()
    row = tab.get_by_role("row", name=re.compile("training"))
    expect(row).to_contain_text(new_end.strftime("%-m/%-d/%Y, %-I:%M:%S %p"))   # en-US, UTC
    lease = lc.a.api.get(f"leases/{lc.lease['id']}").json()
    assert (lease["status"], dt.datetime.fromisoformat(lease["end"]), lease["count"]) == ("confirmed", new_end, 8)
    queue = tab.get_by_test_id("on-demand-queue")
    expect(queue.get_by_test_id("queue-empty")).to_contain_text("Nothing of this project is waiting")


def test_3_cancel_it(lc, tab):
    tab.get_by_role("button", name="Cancel lease training").first.click()
    dialog = tab.get_by_role("dialog")
    expect(dialog).to_contain_text("Cancel the lease “training”?")
    check_a11y(tab, "lease cancel confirmation")
    dialog.get_by_role("button", name="Cancel lease").click()
    expect(tab.get_by_test_id("lease-status").filter(has_text="confirmed")).to_have_count(0)
    assert lc.a.api.get(f"leases/{lc.lease['id']}").json()["status"] == "cancelled"
