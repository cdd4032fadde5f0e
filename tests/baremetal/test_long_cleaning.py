"""A cleaning that takes hours (a secure erase, a multi-pass shred of several NVMe drives) after a tenant's
delete: the delete completes once the server is undeployed and the tenant's access is gone; cleaning, the checks
after it and the receipt go on as the host's own operation (`baremetal.node.clean`) with a deadline sized for
cleaning (`BAREMETAL_CLEAN_TIMEOUT_S`); one still running past it leaves the node held, never available
(docs/adr/1215). The clock is moved with time_machine; the fake driver's node is left in `clean wait`."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
import time_machine

from apps.baremetal.drivers.base import DriverTransientError
from apps.baremetal.models import BaremetalNode, ExitReceipt
from apps.baremetal.services.reconcile import nodes_reconcile
from apps.billing.registry import usage_sources
from apps.compute.models import Instance
from apps.inventory.models import Host
from apps.operations.models import Operation
from apps.operations.runner import operation_run_step
from tests.billing.conftest import utc

from .conftest import bm_body, bm_host, drive, enroll

pytestmark = pytest.mark.django_db

T0, T1 = utc(2026, 6, 1), utc(2026, 6, 3)


@pytest.fixture
def node(world, bm_driver):
    node_id, op = enroll(world.staff_client, bm_host())
    assert op.status == "succeeded"
    return BaremetalNode.objects.select_related("host").get(pk=node_id)


@pytest.fixture
def slow_cleaning(bm_driver, monkeypatch):
    """The undeploy leaves the node cleaning (`clean wait`, heading for `available`) until `finish()`."""
    real = bm_driver.undeploy
    rows = []

    def undeploy(n, **kw):
        real(n, **kw)
        row = bm_driver._row(n, check=False)
        row["state"] = replace(row["state"], provision="clean wait", target_provision="available")
        rows.append(row)
        return bm_driver.get(n)

    monkeypatch.setattr(bm_driver, "undeploy", undeploy)

    def finish():
        (row,) = rows
        row["state"] = replace(row["state"], provision="available", target_provision=None)

    return finish


def _deleted_while_cleaning(world, flavor):
    with time_machine.travel(T0, tick=False):
        resp = world.client_a.post("/api/v1/instances/", bm_body(world, flavor), format="json")
        inst_id = resp.data["instance"]["id"]
        assert drive(resp.data["operation"]["id"]).status == "succeeded"
    with time_machine.travel(T1, tick=False):
        op_id = world.client_a.delete(f"/api/v1/instances/{inst_id}/").data["operation"]["id"]
        op = drive(op_id, follow=False)
    return inst_id, op


def _receipt_steps(inst_id) -> dict:
    return {s["step"]: s for s in json.loads(ExitReceipt.objects.get(instance_id=inst_id).payload)["steps"]}


def test_the_delete_completes_while_hours_of_cleaning_run_and_the_receipt_follows(world, bm_driver, bm_flavor,
                                                                                   node, slow_cleaning):
    inst_id, op = _deleted_while_cleaning(world, bm_flavor)
    # the tenant's delete is done at once: instance deleted, billing ended at the delete, no receipt yet
    assert (op.status, op.error_code) == ("succeeded", "")
    assert Instance.objects.get(pk=inst_id).status == "deleted"
    (interval,) = usage_sources()["compute.instance"](T0, utc(2026, 7, 1))
    assert (interval.start, interval.end) == (T0, T1)
    listed = world.client_a.get(f"/api/v1/bare-metal/exit-receipts/?instance={inst_id}")
    assert (listed.status_code, listed.data["results"]) == (200, [])  # not yet signed: listed once it is
    clean = Operation.objects.get(pk=op.state["clean_operation"])
    assert (clean.kind, clean.project_id, clean.step, clean.status) == ("baremetal.node.clean", None,
                                                                        "wait_cleaned", "pending")
    assert Host.objects.get(pk=node.host_id).state == "maintenance"  # nobody placed on it while cleaning
    # three hours of cleaning: past the delete's hour, within the cleaning's own deadline
    with time_machine.travel(utc(2026, 6, 3, 3), tick=False):
        operation_run_step(clean.pk)
        clean.refresh_from_db()
        assert (clean.status, clean.step, clean.error_code) == ("running", "wait_cleaned", "")
        slow_cleaning()
        assert drive(clean.pk).status == "succeeded"
    assert Host.objects.get(pk=node.host_id).state == "available"
    receipt = world.client_a.get(f"/api/v1/bare-metal/exit-receipts/?instance={inst_id}").data["results"]
    assert len(receipt) == 1
    assert json.loads(receipt[0]["payload"])["issued_at"].startswith("2026-06-03T03:00:00")
    assert _receipt_steps(inst_id)["undeploy"]["started_at"].startswith("2026-06-03T00:00:00")


def test_cleaning_past_its_deadline_holds_the_node_and_the_receipt_says_so(world, bm_driver, bm_flavor, node,
                                                                           slow_cleaning, settings):
    settings.BAREMETAL_CLEAN_TIMEOUT_S = 4 * 3600
    inst_id, op = _deleted_while_cleaning(world, bm_flavor)
    assert op.status == "succeeded"
    clean_id = op.state["clean_operation"]
    with time_machine.travel(utc(2026, 6, 3, 3, 59), tick=False):
        operation_run_step(clean_id)
        assert Operation.objects.get(pk=clean_id).step == "wait_cleaned"
    with time_machine.travel(utc(2026, 6, 3, 4, 1), tick=False):
        clean = drive(clean_id)
    assert (clean.status, clean.error_code) == ("succeeded", "")
    node.refresh_from_db()
    assert "cleaning did not finish within 14400 s (Ironic: clean wait)" in node.held_reason
    assert Host.objects.get(pk=node.host_id).state == "maintenance"
    staff = world.staff_client.get(f"/api/v1/bare-metal/nodes/{node.pk}/")
    assert "cleaning did not finish" in staff.data["held_reason"]
    steps = _receipt_steps(inst_id)
    assert (steps["automated_cleaning"]["result"], steps["automated_cleaning"]["how"]) == (
        "unknown", "unverified: cleaning had not finished 14400 s after the undeploy")
    assert steps["disk_erase_read_back"]["how"] == "skipped: cleaning did not finish within 14400 s"
    # Ironic finishes later: the host still never returns on its own, staff recover it
    slow_cleaning()
    nodes_reconcile()
    assert Host.objects.get(pk=node.host_id).state == "maintenance"
    again = world.client_a.post("/api/v1/instances/", bm_body(world, bm_flavor, name="bm-2"), format="json")
    assert again.status_code == 409 and again.data["code"] == "capacity_unavailable"
    recover = world.staff_client.post(f"/api/v1/bare-metal/nodes/{node.pk}/recover/")
    assert recover.status_code == 202 and drive(recover.data["operation"]["id"]).status == "succeeded"
    assert Host.objects.get(pk=node.host_id).state == "available"


def test_ironic_silent_past_the_cleaning_deadline_holds_the_node_and_signs_what_is_known(
        world, bm_driver, bm_flavor, node, slow_cleaning, settings, monkeypatch):
    settings.BAREMETAL_CLEAN_TIMEOUT_S = 3600
    settings.BAREMETAL_GPU_CHECK_S = 600
    inst_id, op = _deleted_while_cleaning(world, bm_flavor)
    clean_id = op.state["clean_operation"]

    def silent(*a, **kw):
        raise DriverTransientError("Ironic does not answer")

    monkeypatch.setattr(bm_driver, "get", silent)
    with time_machine.travel(utc(2026, 6, 3, 2), tick=False):  # within 3600 + 600 + 3600 s: retried
        operation_run_step(clean_id)
        assert Operation.objects.get(pk=clean_id).status == "running"
    with time_machine.travel(utc(2026, 6, 3, 2, 11), tick=False):  # past it
        clean = drive(clean_id)
    assert (clean.status, clean.error_code) == ("failed", "deadline_exceeded")
    node.refresh_from_db()
    assert "cleaning after instance" in node.held_reason and "deadline_exceeded" in node.held_reason
    assert Host.objects.get(pk=node.host_id).state == "maintenance"
    assert _receipt_steps(inst_id)["automated_cleaning"]["result"] == "unknown"
    assert Instance.objects.get(pk=inst_id).status == "deleted"
