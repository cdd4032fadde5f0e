"""The demo storage catalog (`manage.py demo_load`): one shared `ssd` type, loaded once however often it runs, and
priced by the demo price book, so a demo tenant's volume is a priced line of the invoice preview."""
import io
from decimal import Decimal

import pytest
import time_machine

from apps.billing.demo import load_demo as load_demo_prices
from apps.billing.models import Price
from apps.billing.services import usage_record_collect
from apps.storage.demo import load_demo
from apps.storage.models import VolumeType
from apps.tenancy.models import OrgRole
from tests.billing.conftest import tiers, utc  # noqa: F401  (tiers: fixture)
from tests.tenancy.helpers import client_for, make_org, make_project, make_user, member, token_for

from .conftest import drive, storage_driver  # noqa: F401  (storage_driver: fixture)

pytestmark = pytest.mark.django_db


def test_demo_volume_type_is_loaded_once():
    out = io.StringIO()
    load_demo(out)
    load_demo(out)
    assert [(t.name, t.pool_kind, t.host_local, t.is_active) for t in VolumeType.objects.all()] == [
        ("ssd", "dir", False, True)]
    assert out.getvalue().splitlines() == ["storage: 1 demo volume type created (ssd)",
                                           "storage: 0 demo volume type created (ssd)"]


def test_a_demo_volume_is_priced_on_the_invoice_preview(storage_driver, tiers):  # noqa: F811
    out = io.StringIO()
    load_demo(out)
    load_demo_prices(out)
    org = make_org("demo-storage")
    project = make_project(org, "main")
    owner = make_user("owner@demo-storage.test")
    member(owner, org, OrgRole.OWNER)
    client = client_for(token_for(owner, organization=org))
    ssd = VolumeType.objects.get(name="ssd")
    with time_machine.travel(utc(2026, 3, 1), tick=False):
        resp = client.post("/api/v1/volumes/", {"project": str(project.pk), "name": "data", "size_gib": 20,
                                                "volume_type": str(ssd.pk)}, format="json")
        assert resp.status_code == 202, resp.content
        assert drive(resp.json()["operation"]["id"]).status == "succeeded"
    usage_record_collect(window_start=utc(2026, 3, 1), window_end=utc(2026, 3, 11), sources=["storage.volume"])
    with time_machine.travel(utc(2026, 3, 11), tick=False):
        body = client.get("/api/v1/invoices/preview/", {"organization": str(org.pk)}).json()
    # 20 GiB x 240 h x $0.10 per GiB-month / 744 h in March = $0.6452 -> 0.65
    assert [(ln["sku"], ln["amount"]) for ln in body["lines"]] == [("volume:type=ssd", "0.65")], body["lines"]
    assert (body["currency"], Decimal(body["unpriced_seconds"])) == ("USD", 0)

    load_demo_prices(out)  # an older demo book gets the price it lacks, once; the others stay as they were
    Price.objects.filter(sku="volume:type=ssd").delete()
    Price.objects.filter(sku="public_ip", sla_tier="standard").update(unit_price=Decimal("0.007"))
    load_demo_prices(out)
    load_demo_prices(out)
    assert out.getvalue().splitlines()[-3:] == [
        "billing: demo price book present (0 missing prices added)",
        "billing: demo price book present (2 missing prices added)",
        "billing: demo price book present (0 missing prices added)"]
    assert sorted(Price.objects.filter(sku="volume:type=ssd").values_list("sla_tier", "unit", "unit_price")) == [
        ("premium", "month", Decimal("0.12")), ("standard", "month", Decimal("0.10"))]
    assert Price.objects.get(sku="public_ip", sla_tier="standard").unit_price == Decimal("0.007")
