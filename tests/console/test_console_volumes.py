"""Volumes in the web console, in a real browser against the real stack (its volumes in pools of the hosts'
libvirt test driver, tests/e2e/stack.py): a tenant creates a volume (after a size the type refuses), attaches it
to an active instance, is refused a smaller size (on the field) and the delete of the attached volume (in the
panel), detaches it, takes a snapshot, restores it into a new volume, deletes the snapshot and the volume. Each
step is one test; they share the state (`V`) and run in file order; a failed step skips the later ones."""
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

V = SimpleNamespace()


@pytest.fixture(scope="module")
def world(console_stack):
    V.stack = console_stack
    V.base = console_stack.base
    V.ops = Api(console_stack.base, console_stack.ops_token)
    V.type = V.ops.post("volume-types", {
        "name": "console-ssd", "pool": "gpucloud-console-ssd", "pool_kind": "dir", "iops_class": "high",
        "pool_target_path": "/var/lib/gpucloud/console-ssd", "max_size_gib": 1000}, expect=201).json()
    V.a = tenant(console_stack, V.ops, "depot", "owner@depot.example")
    cat = catalog(console_stack)
    V.follower = cat.follower
    vm = V.a.api.post("instances", {"project": V.a.project["id"], "name": "trainer", "flavor": cat.flavor_8x["id"],
                                    "image": cat.image["id"]}, headers={"Idempotency-Key": "volumes-vm"},
                      expect=202).json()["instance"]
    V.vm = poll(lambda: (x := V.a.api.get(f"instances/{vm['id']}").json())["status"] == "active" and x,
                timeout=300, what="the instance active")
    return V


@pytest.fixture
def v(request, world):
    failed = request.module.__dict__.get("_FAILED_STEPS")
    if failed:
        pytest.skip(f"an earlier step failed: {failed[0]}")
    return V


@pytest.fixture(scope="module")
def tab(browser, world):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def _volumes(v) -> list[dict]:
    return v.a.api.get("volumes", params={"project": v.a.project["id"]}).json()["results"]


def _row(tab, name: str):
    # a row's name starts with its first cell's, the name's button: "Manage volume <name>"
    return tab.get_by_role("table", name="Volumes").get_by_role("row", name=re.compile(rf"^Manage volume {re.escape(name)} "))


def _shot(tab, name: str) -> None:
    tab.evaluate("window.scrollTo(0, 0)")   # a full-page shot of a scrolled page draws the fixed header mid-page
    shot(tab, name)


def _panel(tab, name: str):
    return tab.get_by_role("region", name=f"Volume {name}")


def test_1_create_a_volume_after_a_size_too_large(v, tab):
    sign_in(tab, v.base, v.a.email)
    tab.get_by_role("link", name="Volumes").click()
    expect(tab.get_by_test_id("empty-state")).to_contain_text("No volumes yet")
    check_a11y(tab, "volumes (empty)")
    tab.get_by_label(re.compile(r"^Name")).fill("datasets")
    tab.get_by_role("combobox", name=re.compile(r"^Type")).click()
    tab.get_by_role("option", name=re.compile(r"^console-ssd")).click()
    size = tab.get_by_label(re.compile(r"^Size \(GiB\)"))
    size.fill("5000")                                                         # over the type's 1000 GiB
    tab.get_by_role("button", name="Create volume").click()
    expect(size).to_have_attribute("aria-invalid", "true")
    expect(tab.get_by_role("alert").first).to_contain_text("The volume was not created")
    assert _volumes(v) == []                                                  # nothing left behind
    expect(tab.get_by_label(re.compile(r"^Name"))).to_have_value("datasets")  # the form kept what was typed
    size.fill("20")
    tab.get_by_role("button", name="Create volume").click()
    row = _row(tab, "datasets")
    expect(row.get_by_test_id("status")).to_have_text("available", timeout=30_000)
    expect(row).to_contain_text("console-ssd")
    expect(row).to_contain_text("20 GiB")
    [vol] = _volumes(v)
    assert (vol["name"], vol["size_gib"], vol["volume_type"], vol["status"]) == ("datasets", 20, v.type["id"],
                                                                                 "available")
    v.volume = vol
    check_a11y(tab, "volumes")
    _shot(tab, "volumes")


def test_2_attach_it_to_the_instance(v, tab):
    panel = _panel(tab, "datasets")
    expect(panel).to_be_visible()                       # the panel of the volume just created
    panel.get_by_role("combobox", name=re.compile(r"^Instance")).click()
    tab.get_by_role("option", name="trainer (active)").click()
    panel.get_by_role("button", name="Attach").click()
    expect(_row(tab, "datasets").get_by_test_id("status")).to_have_text("in-use", timeout=30_000)
    attachments = panel.get_by_role("table", name="Attachments of datasets")
    expect(attachments).to_contain_text("trainer")
    expect(attachments).to_contain_text("vdb")
    got = v.a.api.get(f"volumes/{v.volume['id']}").json()
    assert [(a["instance"], a["device"], a["status"]) for a in got["attachments"]] == [
        (v.vm["id"], "vdb", "attached")]


def test_3_smaller_size_and_delete_while_attached_are_refused(v, tab):
    panel = _panel(tab, "datasets")
    new_size = panel.get_by_label(re.compile(r"^New size \(GiB\)"))
    new_size.fill("10")
    panel.get_by_role("button", name="Resize").click()
    expect(new_size).to_have_attribute("aria-invalid", "true")
    expect(panel).to_contain_text("Must be larger than 20 GiB: volumes never shrink.")
    panel.get_by_role("button", name="Delete volume datasets").click()
    tab.get_by_role("dialog").get_by_role("button", name="Delete volume").click()
    expect(panel.get_by_role("alert").filter(has_text="The volume was not deleted")).to_contain_text("in-use")
    got = v.a.api.get(f"volumes/{v.volume['id']}").json()
    assert (got["status"], got["size_gib"]) == ("in-use", 20)
    check_a11y(tab, "volume panel (refusals)")
    _shot(tab, "volume-refusals")


def test_4_detach(v, tab):
    panel = _panel(tab, "datasets")
    panel.get_by_role("button", name="Detach from trainer").click()
    tab.get_by_role("dialog").get_by_role("button", name="Detach").click()
    expect(_row(tab, "datasets").get_by_test_id("status")).to_have_text("available", timeout=30_000)
    expect(panel.get_by_role("table", name="Attachments of datasets")).to_have_count(0)
    assert v.a.api.get(f"volumes/{v.volume['id']}").json()["attachments"] == []


def test_5_snapshot_and_restore(v, tab):
    panel = _panel(tab, "datasets")
    panel.get_by_label(re.compile(r"^Snapshot name")).fill("before-upgrade")
    panel.get_by_role("button", name="Take snapshot").click()
    snaps = panel.get_by_role("table", name="Snapshots of datasets")
    expect(snaps.get_by_test_id("status")).to_have_text("available", timeout=30_000)
    panel.get_by_role("button", name="Restore before-upgrade").click()
    restored = _row(tab, "before-upgrade-restored")
    expect(restored.get_by_test_id("status")).to_have_text("available", timeout=30_000)
    expect(restored).to_contain_text("20 GiB")
    check_a11y(tab, "volume panel (snapshots)")
    _shot(tab, "volume-snapshots")


def test_6_delete_the_snapshot_and_the_volume(v, tab):
    panel = _panel(tab, "datasets")
    panel.get_by_role("button", name="Delete snapshot before-upgrade").click()
    tab.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(panel.get_by_role("table", name="Snapshots of datasets")).to_have_count(0, timeout=30_000)
    panel.get_by_role("button", name="Delete volume datasets").click()
    tab.get_by_role("dialog").get_by_role("button", name="Delete volume").click()
    expect(_row(tab, "datasets").get_by_test_id("status")).to_have_text("deleted", timeout=30_000)
    by_name = {x["name"]: x for x in _volumes(v)}
    assert (by_name["datasets"]["status"], by_name["before-upgrade-restored"]["status"]) == ("deleted", "available")
    snaps = v.a.api.get("snapshots", params={"project": v.a.project["id"]}).json()["results"]
    assert [(s["name"], s["status"]) for s in snaps] == [("before-upgrade", "deleted")]
