"""A resize splits the instance's usage, and each piece is rated at the flavor (and price) it had then.

Found when billing was checked against resizes: usage not yet recorded when an instance was resized was rated
at the new flavor, because the usage source read the instance's current flavor for every ledger period. Two
resizes in one billing period must give three priced intervals.
"""
from __future__ import annotations

from decimal import Decimal

import pytest
import time_machine

from apps.billing.models import Invoice, UsageRecord
from apps.billing.services import invoice_run_execute, usage_record_collect
from apps.compute.billing import instance_usage
from apps.compute.models import Flavor, Instance
from tests.billing.conftest import book, tiers, utc  # noqa: F401  (tiers: fixture)

from .conftest import create_body, drive, gpu_host

pytestmark = pytest.mark.django_db


def _resize(world, inst_id, flavor, at):
    with time_machine.travel(at, tick=False):
        r = world.client_a.post(f"/api/v1/instances/{inst_id}/resize/", {"flavor": str(flavor.pk)}, format="json")
        assert r.status_code == 202, r.content
        assert drive(r.data["operation"]["id"]).status == "succeeded"


def test_two_resizes_give_three_intervals_at_three_flavors_and_prices(world, tiers):  # noqa: F811
    gpu_host(gpus=1, threads=32, memory_mib=262144)
    medium = Flavor.objects.create(name="c4", vcpus=4, memory_mib=8192, disk_gib=20)
    large = Flavor.objects.create(name="c8", vcpus=8, memory_mib=16384, disk_gib=20)
    book(utc(2026, 1, 1), {("flavor:name=c2", "standard", "on_demand"): "1.00",
                           ("flavor:name=c4", "standard", "on_demand"): "2.00",
                           ("flavor:name=c8", "standard", "on_demand"): "4.00"})
    with time_machine.travel(utc(2026, 6, 1), tick=False):
        resp = world.client_a.post("/api/v1/instances/", create_body(world, world.cpu), format="json")
        assert drive(resp.data["operation"]["id"]).status == "succeeded"
        inst_id = resp.data["instance"]["id"]
    with time_machine.travel(utc(2026, 6, 2), tick=False):
        r = world.client_a.post(f"/api/v1/instances/{inst_id}/stop/", {"hard": True}, format="json")
        drive(r.data["operation"]["id"])
    _resize(world, inst_id, medium, utc(2026, 6, 3))   # c2 for 2 days
    _resize(world, inst_id, large, utc(2026, 6, 5))    # c4 for 2 days, then c8
    assert Instance.objects.get(pk=inst_id).flavor == large

    pieces = sorted((i.start, i.end, i.sku) for i in instance_usage(utc(2026, 6, 1), utc(2026, 7, 1)))
    assert [(p[0], p[2]) for p in pieces] == [(utc(2026, 6, 1), "flavor:name=c2"), (utc(2026, 6, 3), "flavor:name=c4"),
                                              (utc(2026, 6, 5), "flavor:name=c8")]
    assert [p[1] for p in pieces[:2]] == [utc(2026, 6, 3), utc(2026, 6, 5)]

    with time_machine.travel(utc(2026, 6, 6), tick=False):
        usage_record_collect(window_start=utc(2026, 6, 1), window_end=utc(2026, 6, 6), sources=["compute.instance"])
    skus = set(UsageRecord.objects.filter(resource_id=inst_id).values_list("sku", flat=True))
    assert skus == {"flavor:name=c2", "flavor:name=c4", "flavor:name=c8"}
    with time_machine.travel(utc(2026, 7, 2), tick=False):
        invoice_run_execute(period="2026-06")
    lines = {line.sku: line for line in Invoice.objects.get(organization=world.org_a, period="2026-06").lines.all()}
    assert lines["flavor:name=c2"].amount == Decimal("48.00")    # 48 h x $1.00
    assert lines["flavor:name=c4"].amount == Decimal("96.00")    # 48 h x $2.00
    assert lines["flavor:name=c8"].amount == Decimal("2496.00")  # 5 June to the end of June: 624 h x $4.00
