"""A bare-metal instance is metered like a VM by compute's usage source (the whole host's GPUs), from active to
the start of its delete: cleaning is not billed. The reconciler mirrors what Ironic reports and notices an
out-of-band power-off. A delete during a deploy leaves nothing behind."""
from __future__ import annotations

from decimal import Decimal

import pytest
import time_machine

from apps.baremetal.models import BaremetalNode, ExitReceipt
from apps.baremetal.services.reconcile import nodes_reconcile
from apps.billing.registry import usage_sources
from apps.compute.models import Instance
from apps.inventory.models import Host
from apps.operations.models import Operation
from apps.operations.runner import operation_run_step
from apps.scheduling.models import Allocation
from tests.billing.conftest import utc

from .conftest import bm_body, bm_host, drive, enroll

pytestmark = pytest.mark.django_db


@pytest.fixture
def node(world, bm_driver):
    node_id, op = enroll(world.staff_client, bm_host())
    assert op.status == "succeeded"
    return BaremetalNode.objects.select_related("host").get(pk=node_id)


def _create(world, flavor, name="bm-1"):
    resp = world.client_a.post("/api/v1/instances/", bm_body(world, flavor, name=name), format="json")
    assert resp.status_code == 202, resp.content
    return resp.data["instance"]["id"], resp.data["operation"]["id"]


def test_usage_is_the_whole_host_from_active_to_delete_and_cleaning_is_not_billed(world, bm_driver, bm_flavor,
                                                                                   node):
    with time_machine.travel(utc(2026, 6, 1), tick=False):
        inst_id, op_id = _create(world, bm_flavor)
        assert drive(op_id).status == "succeeded"
    with time_machine.travel(utc(2026, 6, 3), tick=False):
        op_id = world.client_a.delete(f"/api/v1/instances/{inst_id}/").data["operation"]["id"]
        operation_run_step(op_id)  # undeploy, first commit: the allocation ends, the host leaves placement
        operation_run_step(op_id)  # undeploy, second: Ironic is asked; cleaning starts
        operation_run_step(op_id)  # detach_networks (none)
        operation_run_step(op_id)  # verify_fabric (no fabric to check)
        assert Operation.objects.get(pk=op_id).step == "clean_start"
        assert Host.objects.get(pk=node.host_id).state == "maintenance"  # nobody placed on it while cleaning
    with time_machine.travel(utc(2026, 6, 3, 0, 40), tick=False):  # cleaning took 40 minutes
        assert drive(op_id).status == "succeeded"
        assert Host.objects.get(pk=node.host_id).state == "available"
    (interval,) = usage_sources()["compute.instance"](utc(2026, 6, 1), utc(2026, 7, 1))
    assert (interval.sku, interval.units, interval.gpu_equivalents, interval.gpu_model, interval.start,
            interval.end, interval.resource_id) == (
        "flavor:name=bm-h100x8", Decimal(1), Decimal(8), "H100-SXM5-80GB", utc(2026, 6, 1), utc(2026, 6, 3),
        inst_id)


def test_reconcile_mirrors_ironic_and_notices_an_out_of_band_power_off(world, bm_driver, bm_flavor, node):
    inst_id, op_id = _create(world, bm_flavor)
    drive(op_id)
    bm_driver.set_power(node.ironic_id, "off")  # someone pressed the button / used the BMC directly
    report = nodes_reconcile()
    assert (report.nodes, report.changed, report.stopped) == (1, 1, 1)
    node.refresh_from_db()
    assert (node.provision_state, node.power_state) == ("active", "off")
    inst = Instance.objects.get(pk=inst_id)
    assert (inst.status, inst.observed_state) == ("stopped", "off")
    assert Allocation.objects.filter(consumer_id=inst_id, period__upper_inf=True).exists()  # still the tenant's
    bm_driver.bmc_down(node.ironic_id, calls=1)
    report = nodes_reconcile()
    assert report.unreachable == [node.host.name] and report.changed == 0


def test_a_delete_during_the_deploy_cancels_it_and_leaves_nothing(world, bm_driver, bm_flavor, node):
    inst_id, op_id = _create(world, bm_flavor)
    operation_run_step(op_id)  # place_and_claim
    operation_run_step(op_id)  # attach_networks (none)
    operation_run_step(op_id)  # deploy requested
    assert bm_driver.get(node.ironic_id).instance_id == inst_id
    delete = world.client_a.delete(f"/api/v1/instances/{inst_id}/")
    assert delete.status_code == 202
    assert Operation.objects.get(pk=op_id).status == "cancelled"
    assert drive(delete.data["operation"]["id"]).status == "succeeded"
    assert drive(op_id).status == "cancelled"  # a late step of the create does nothing
    assert Instance.objects.get(pk=inst_id).status == "deleted"
    assert not Allocation.objects.filter(consumer_id=inst_id, period__upper_inf=True).exists()
    seen = bm_driver.get(node.ironic_id)
    assert (seen.state.provision, seen.instance_id) == ("available", "")
    assert ExitReceipt.objects.filter(instance_id=inst_id).count() == 1
    assert Host.objects.get(pk=node.host_id).state == "available"


def test_a_failed_clean_holds_the_node_and_the_receipt_says_so(world, bm_driver, bm_flavor, node, monkeypatch):
    from apps.baremetal.drivers.base import ProvisionState

    inst_id, op_id = _create(world, bm_flavor)
    drive(op_id)
    real_undeploy = bm_driver.undeploy

    def undeploy_then_clean_fails(n, **kw):
        seen = real_undeploy(n, **kw)
        from dataclasses import replace

        row = bm_driver._row(n, check=False)
        row["state"] = replace(row["state"], provision=ProvisionState.CLEAN_FAILED, last_error="disk erase failed")
        return seen

    monkeypatch.setattr(bm_driver, "undeploy", undeploy_then_clean_fails)
    assert drive(world.client_a.delete(f"/api/v1/instances/{inst_id}/").data["operation"]["id"]).status == \
        "succeeded"
    node.refresh_from_db()
    assert "cleaning failed: disk erase failed" in node.held_reason
    assert Host.objects.get(pk=node.host_id).state == "maintenance"  # never handed to the next tenant
    import json

    steps = {s["step"]: s for s in json.loads(ExitReceipt.objects.get(instance_id=inst_id).payload)["steps"]}
    assert (steps["automated_cleaning"]["result"], steps["automated_cleaning"]["detail"]) == ("failed",
                                                                                              "disk erase failed")
    again = world.client_a.post("/api/v1/instances/", bm_body(world, bm_flavor, name="bm-2"), format="json")
    assert again.status_code == 409 and again.data["code"] == "capacity_unavailable"
    recover = world.staff_client.post(f"/api/v1/bare-metal/nodes/{node.pk}/recover/")
    assert recover.status_code == 202 and drive(recover.data["operation"]["id"]).status == "succeeded"
    assert Host.objects.get(pk=node.host_id).state == "available"
    assert bm_driver.get(node.ironic_id).state.provision == "available"


def test_the_reconcile_is_scheduled_on_a_registered_task():
    from gpucloud.celery import app, collect_beat_schedule

    ours = {k: v for k, v in collect_beat_schedule().items() if k.startswith("baremetal-")}
    assert {v["task"] for v in ours.values()} == {"baremetal.nodes_reconcile_task"}
    app.loader.import_default_modules()
    assert all(v["task"] in app.tasks for v in ours.values())


def test_the_invoice_bills_deploy_to_delete_at_the_instance_tier_and_not_the_cleaning(world, bm_driver, bm_flavor,
                                                                                       node):
    """Deployed at T0, deleted at T1 (the undeploy starts), cleaning ends at T2: the invoice line is T1 - T0 host
    hours at the price of the tier the instance was bought at (premium in a standard organization)."""
    from apps.billing.models import Invoice, UsageRecord
    from apps.billing.services import invoice_run_execute
    from apps.billing.skus import sku_for
    from tests.billing.conftest import book

    t0, t1, t2 = utc(2026, 6, 1, 6), utc(2026, 6, 3, 18), utc(2026, 6, 3, 18, 45)
    import importlib

    from django.apps import apps

    importlib.import_module("apps.billing.migrations.0002_defaults_and_guards").seed(apps, None)
    sku = sku_for("flavor", name=bm_flavor.name)
    book(utc(2026, 1, 1), {(sku, "standard", "on_demand"): "21.12", (sku, "premium", "on_demand"): "30.00"})
    assert world.org_a.default_sla_tier == "standard"
    with time_machine.travel(t0, tick=False):
        resp = world.client_a.post("/api/v1/instances/", bm_body(world, bm_flavor, sla_tier="premium"),
                                   format="json")
        assert resp.status_code == 202, resp.content
        inst_id = resp.data["instance"]["id"]
        assert drive(resp.data["operation"]["id"]).status == "succeeded"
    with time_machine.travel(t1, tick=False):
        op_id = world.client_a.delete(f"/api/v1/instances/{inst_id}/").data["operation"]["id"]
        for _ in range(4):  # undeploy (intent + allocation end, then Ironic), detach_networks, verify_fabric
            operation_run_step(op_id)
        assert Operation.objects.get(pk=op_id).step == "clean_start"
    with time_machine.travel(t2, tick=False):
        assert drive(op_id).status == "succeeded"
        assert ExitReceipt.objects.filter(instance_id=inst_id).exists()
    with time_machine.travel(utc(2026, 7, 2), tick=False):
        invoice_run_execute(period="2026-06")
        line = Invoice.objects.get(organization=world.org_a, period="2026-06").lines.get()
    hours = Decimal((t1 - t0).total_seconds()) / 3600  # 60 h; not the 45 min of cleaning
    assert (line.sku, line.sla_tier, line.billed_seconds, line.unit_price, line.amount) == (
        sku, "premium", Decimal((t1 - t0).total_seconds()), Decimal("30.00"), hours * Decimal("30.00"))
    assert set(UsageRecord.objects.filter(resource_id=inst_id).values_list("sla_tier", flat=True)) == {"premium"}
