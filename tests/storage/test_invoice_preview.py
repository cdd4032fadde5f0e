"""Volumes on the tenant's invoice preview: GiB held per volume type, priced per GiB-month (prorated by the second
over the billing month) or per GiB-hour, to the cent; an extend bills the new size from its end on, a delete
stops the meter at its request. The real storage usage source, recorder, rating and preview endpoint."""
from __future__ import annotations

from decimal import Decimal

import pytest
import time_machine

from apps.billing.services import usage_record_collect
from apps.tenancy.models import OrgRole
from tests.billing.conftest import book, tiers, utc  # noqa: F401  (tiers: fixture)
from tests.tenancy.helpers import client_for, make_user, member, token_for

from .conftest import drive, volume_body

pytestmark = pytest.mark.django_db


def _ok(resp) -> None:
    assert resp.status_code == 202, resp.content
    assert drive(resp.json()["operation"]["id"]).status == "succeeded"


def test_volume_gib_hours_per_type_on_the_invoice_preview(world, storage_driver, tiers):  # noqa: F811
    book(utc(2026, 1, 1), {("volume:type=ssd", "standard", "on_demand"): {"unit_price": Decimal("0.10"),
                                                                           "unit": "month"},
                           ("volume:type=nvme-local", "standard", "on_demand"): {"unit_price": Decimal("0.0005"),
                                                                                  "unit": "hour"}})
    owner = make_user("owner@storage-a.test")
    member(owner, world.org_a, OrgRole.OWNER)
    with time_machine.travel(utc(2026, 3, 1, 10), tick=False):
        client = client_for(token_for(owner, organization=world.org_a))
        created = client.post("/api/v1/volumes/", volume_body(world, "data", 100), format="json")
        _ok(created)
        ssd = created.json()["volume"]["id"]
        local = client.post("/api/v1/volumes/", {**volume_body(world, "scratch", 50), "volume_type": str(world.local.pk),
                                                 "instance": str(world.instance_a.pk)}, format="json")
        _ok(local)
        nvme = local.json()["volume"]["id"]
    with time_machine.travel(utc(2026, 3, 2, 16, 15), tick=False):
        _ok(client.delete(f"/api/v1/volumes/{nvme}/"))
    with time_machine.travel(utc(2026, 3, 3, 10), tick=False):
        _ok(client.post(f"/api/v1/volumes/{ssd}/extend/", {"size_gib": 150}, format="json"))
    with time_machine.travel(utc(2026, 3, 5, 10), tick=False):
        _ok(client.delete(f"/api/v1/volumes/{ssd}/"))
    usage_record_collect(window_start=utc(2026, 3, 1), window_end=utc(2026, 3, 6), sources=["storage.volume"])

    with time_machine.travel(utc(2026, 3, 10, 12), tick=False):
        resp = client.get("/api/v1/invoices/preview/", {"organization": str(world.org_a.pk)})
    assert resp.status_code == 200, resp.content
    body = resp.json()
    lines = sorted((ln["sku"], ln["resource_id"], ln["amount"]) for ln in body["lines"])
    # ssd: (100 GiB x 48 h + 150 GiB x 48 h) x $0.10 per GiB-month / 744 h in March = $1.6129 -> 1.61
    # nvme-local: 50 GiB x 30.25 h x $0.0005 per GiB-hour = $0.75625 -> 0.76 (half up)
    assert lines == [("volume:type=nvme-local", nvme, "0.76"), ("volume:type=ssd", ssd, "1.61")], body["lines"]
    assert (body["period"], body["currency"], body["subtotal"]) == ("2026-03", "USD", "2.37")
