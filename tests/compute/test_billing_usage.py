"""Compute's billing usage source and placement resolver (apps/compute/billing.py) with billing's real recorder,
invoice run and SLA credits: an instance created and deleted through the API and the step runner is billed from the
ledger, minus provider-fault downtime, and gets its SLA credit."""
from __future__ import annotations

from decimal import Decimal

import pytest
import time_machine

from apps.billing.models import Invoice, SlaReport, UsageRecord
from apps.billing.registry import placement_resolvers, usage_sources
from apps.billing.services import invoice_run_execute, usage_record_collect
from apps.billing.skus import sku_for
from apps.compute.models import Instance
from tests.billing.conftest import book, incident, tiers, utc  # noqa: F401  (tiers: fixture)

from .conftest import create_body, drive, gpu_host
from .test_instance_lifecycle import _agent_complete

pytestmark = pytest.mark.django_db


def _create_and_delete(world, host, *, created, deleted, **extra) -> Instance:
    with time_machine.travel(created, tick=False):
        resp = world.client_a.post("/api/v1/instances/", {**create_body(world, world.gpu1), **extra}, format="json")
        assert resp.status_code == 202, resp.content
        inst = Instance.objects.get(pk=resp.data["instance"]["id"])
        op = drive(resp.data["operation"]["id"])
        for _ in range(5):  # the node agent activates the NVSwitch partition
            part = Instance.objects.get(pk=inst.pk).devices.get("partition")
            if op.status != "running":
                break
            _agent_complete(host, list(host.agent_commands.filter(status="queued")), {"active_partitions": [part]})
            op = drive(op.pk)
        assert op.status == "succeeded"
    with time_machine.travel(deleted, tick=False):
        resp = world.client_a.delete(f"/api/v1/instances/{inst.pk}/")
        op = drive(resp.data["operation"]["id"])
        for _ in range(5):
            if op.status != "running":
                break
            for cmd in host.agent_commands.filter(status="queued"):
                _agent_complete(host, [cmd], {"active_partitions": []} if "partition" in cmd.kind else None)
            op = drive(op.pk)
        assert op.status == "succeeded"
    inst.refresh_from_db()
    assert inst.status == "deleted"
    return inst


def test_registered():
    assert "compute.instance" in usage_sources() and "compute.instance" in placement_resolvers()


def test_instance_usage_invoice_downtime_and_sla_credit(world, tiers):  # noqa: F811
    """Active 1-11 June 2026 (240 h) on a standard-tier org, host down 9 h by a provider fault: 231 h charged at
    $2.00 = $462.00; uptime below 99 % gives the standard tier's 10 % credit ($46.20) on the July invoice."""
    host = gpu_host(gpus=8)
    book(utc(2026, 1, 1), {(sku_for("flavor", name="g1-h100"), "standard", "on_demand"): "2.00"})
    inst = _create_and_delete(world, host, created=utc(2026, 6, 1), deleted=utc(2026, 6, 11))
    incident(host, utc(2026, 6, 5), utc(2026, 6, 5, 9))

    (interval,) = usage_sources()["compute.instance"](utc(2026, 6, 1), utc(2026, 7, 1))
    assert (interval.sku, interval.pricing_model, interval.units, interval.gpu_equivalents, interval.gpu_model,
            interval.start, interval.end, interval.organization_id) == (
        "flavor:name=g1-h100", "on_demand", Decimal(1), Decimal(1), "H100-SXM5-80GB", utc(2026, 6, 1),
        utc(2026, 6, 11), world.org_a.pk)
    placed = list(placement_resolvers()["compute.instance"](host.pk, None, utc(2026, 6, 5), utc(2026, 6, 6)))
    assert [(p.resource_type, p.resource_id) for p in placed] == [("instance", str(inst.pk))]
    assert list(placement_resolvers()["compute.instance"](host.pk, None, utc(2026, 6, 12), utc(2026, 6, 13))) == []

    with time_machine.travel(utc(2026, 7, 2), tick=False):
        first = usage_record_collect(window_start=utc(2026, 6, 1), window_end=utc(2026, 7, 1),
                                     sources=["compute.instance"])
        assert first["compute.instance"] > 0
        again = usage_record_collect(window_start=utc(2026, 6, 1), window_end=utc(2026, 7, 1),
                                     sources=["compute.instance"])
        assert again["compute.instance"] == 0  # idempotent
        assert UsageRecord.objects.filter(resource_id=str(inst.pk)).exists()
        invoice_run_execute(period="2026-06")
        june = Invoice.objects.get(organization=world.org_a, period="2026-06")
        line = june.lines.get()
        assert (line.sku, line.billed_seconds, line.amount) == ("flavor:name=g1-h100", Decimal(231 * 3600),
                                                                Decimal("462.00"))
        report = SlaReport.objects.get(resource_id=str(inst.pk), period="2026-06")
        assert (report.credit_pct, report.credit_amount) == (Decimal("10"), Decimal("46.20"))
    with time_machine.travel(utc(2026, 8, 2), tick=False):  # the credit lands on the next (July) invoice
        invoice_run_execute(period="2026-07")
        july = Invoice.objects.get(organization=world.org_a, period="2026-07")
        assert july.lines.get(kind="sla_credit").amount == Decimal("-46.20")


def test_instance_bought_at_premium_is_priced_and_credited_at_premium(world, tiers):  # noqa: F811
    """Org default tier standard; the instance is bought at premium: its usage is priced at the premium price
    ($3.00, not $2.00) and its 96.25 % uptime gets premium's 25 % credit (standard's would be 10 %)."""
    host = gpu_host(gpus=8)
    sku = sku_for("flavor", name="g1-h100")
    book(utc(2026, 1, 1), {(sku, "standard", "on_demand"): "2.00", (sku, "premium", "on_demand"): "3.00"})
    assert world.org_a.default_sla_tier == "standard"
    inst = _create_and_delete(world, host, created=utc(2026, 6, 1), deleted=utc(2026, 6, 11), sla_tier="premium")
    assert inst.sla_tier == "premium"
    assert world.client_a.get(f"/api/v1/instances/{inst.pk}/").data["sla_tier"] == "premium"
    incident(host, utc(2026, 6, 5), utc(2026, 6, 5, 9))
    with time_machine.travel(utc(2026, 7, 2), tick=False):
        invoice_run_execute(period="2026-06")
        line = Invoice.objects.get(organization=world.org_a, period="2026-06").lines.get()
        assert (line.sla_tier, line.billed_seconds, line.amount) == ("premium", Decimal(231 * 3600),
                                                                     Decimal("693.00"))
        report = SlaReport.objects.get(resource_id=str(inst.pk), period="2026-06")
        assert (report.sla_tier, report.target_uptime_pct, report.credit_pct, report.credit_amount) == (
            "premium", Decimal("99.9"), Decimal("25"), Decimal("173.25"))
    assert set(UsageRecord.objects.filter(resource_id=str(inst.pk)).values_list("sla_tier", flat=True)) == {
        "premium"}


def test_premium_cluster_in_a_standard_organization_is_priced_and_credited_at_premium(world, tiers):  # noqa: F811
    """Tier per resource on a cluster: bought at premium in a standard organization, both members carry premium.
    All of June 2026 (720 h) at the premium $3.00 (standard: $2.00); one member's host is down 9 h by a provider
    fault: that member bills 711 h = $2,133.00 and its 98.75 % uptime gets premium's 25 % ($533.25; standard's
    schedule would give 10 %); the other member bills 720 h = $2,160.00 and is not credited."""
    from apps.compute.models import Cluster
    from apps.operations.models import Operation

    from .test_clusters import _body, _cabled_hosts

    sku = sku_for("flavor", name="g1-h100")
    book(utc(2026, 1, 1), {(sku, "standard", "on_demand"): "2.00", (sku, "premium", "on_demand"): "3.00"})
    assert world.org_a.default_sla_tier == "standard"
    _cabled_hosts(2)
    with time_machine.travel(utc(2026, 6, 1), tick=False):
        resp = world.client_a.post("/api/v1/clusters/", {**_body(world, 2), "sla_tier": "premium"}, format="json")
        assert resp.status_code == 201, resp.content
        assert resp.data["sla_tier"] == "premium"
        assert drive(Operation.objects.get(kind="cluster.create").pk).status == "succeeded"
        for op in Operation.objects.filter(kind="instance.create"):
            assert drive(op.pk).status == "succeeded"
    cluster = Cluster.objects.get(pk=resp.data["id"])
    first, second = cluster.members.order_by("name")
    assert (cluster.sla_tier, first.sla_tier, second.sla_tier) == ("premium", "premium", "premium")
    incident(first.host, utc(2026, 6, 5), utc(2026, 6, 5, 9))
    with time_machine.travel(utc(2026, 7, 2), tick=False):
        invoice_run_execute(period="2026-06")
    june = Invoice.objects.get(organization=world.org_a, period="2026-06")
    lines = {line.resource_id: line for line in june.lines.filter(kind="usage")}
    assert {(r, line.sla_tier, line.unit_price, line.billed_seconds, line.amount) for r, line in lines.items()} == {
        (str(first.pk), "premium", Decimal("3.00"), Decimal(711 * 3600), Decimal("2133.00")),
        (str(second.pk), "premium", Decimal("3.00"), Decimal(720 * 3600), Decimal("2160.00"))}
    reports = {r.resource_id: r for r in SlaReport.objects.filter(period="2026-06")}
    assert (reports[str(first.pk)].sla_tier, reports[str(first.pk)].target_uptime_pct,
            reports[str(first.pk)].credit_pct, reports[str(first.pk)].credit_amount) == (
        "premium", Decimal("99.9"), Decimal("25"), Decimal("533.25"))
    assert str(second.pk) not in reports or reports[str(second.pk)].credit_amount == 0
    assert set(UsageRecord.objects.filter(resource_id__in=[str(first.pk), str(second.pk)])
               .values_list("sla_tier", flat=True)) == {"premium"}


def test_instance_default_tier_and_unknown_tier(world, tiers):  # noqa: F811
    gpu_host(gpus=8)
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
    assert resp.status_code == 202, resp.content
    assert resp.data["instance"]["sla_tier"] == "standard"
    assert Instance.objects.get(pk=resp.data["instance"]["id"]).sla_tier == "standard"
    body = {**create_body(world, world.gpu1), "name": "other", "sla_tier": "platinum"}
    resp = world.client_a.post("/api/v1/instances/", body, format="json")
    assert resp.status_code == 400 and resp.data["code"] == "unknown_sla_tier", resp.content
    assert not Instance.objects.filter(name="other").exists()


def test_instance_never_launched_is_not_billed(world):
    from apps.compute.billing import instance_usage

    gpu_host(gpus=8)
    with time_machine.travel(utc(2026, 6, 1), tick=False):
        resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
        drive(resp.data["operation"]["id"])  # claims, then waits for the agent: never launched
    assert Instance.objects.get(pk=resp.data["instance"]["id"]).launched_at is None
    assert list(instance_usage(utc(2026, 6, 1), utc(2026, 7, 1))) == []
