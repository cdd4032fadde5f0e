"""Launch checks: `POST /instances/check/` and `POST /clusters/check/` answer what the create with the same body
would do - placeable now, or the code, reason and explanation of the placement rule or the quota, when it would
fit, the queue it would join and the price - and write nothing (docs/adr/0405-launch-checks.md).

Why: the console's launch wizard and the Terraform provider's `plan` need that answer before they create
anything; a check that disagreed with the create (another order of checks, another quota count) would make the
plan lie, so the check runs the create's own steps and rolls them back.
"""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from apps.audit.models import AuditEvent
from apps.billing.services.catalog import price_book_create, price_set
from apps.compute.models import Cluster, Instance
from apps.core import clock
from apps.operations.models import Operation
from apps.reservations.models import QueuedRequest
from apps.scheduling.models import Allocation
from apps.tenancy.models import OrgRole, Quota
from tests.billing.conftest import tiers  # noqa: F401  (fixture)
from tests.tenancy.helpers import client_for, make_user, member, token_for

from .conftest import create_body, gpu_host, new_uuid
from .test_clusters import _body as cluster_body
from .test_clusters import _cabled_hosts
from .test_placement_rule import _hold

pytestmark = pytest.mark.django_db
INSTANCE, CLUSTER = "/api/v1/instances/check/", "/api/v1/clusters/check/"


def _rows() -> tuple[int, ...]:
    return (Instance.objects.count(), Cluster.objects.count(), Allocation.objects.count(),
            Operation.objects.count(), AuditEvent.objects.exclude(action="api.request.refused").count(),
            QueuedRequest.objects.count())


def _prices(world, **per_flavor):
    book = price_book_create(actor=None, name="list", currency="USD",
                             effective_from=clock.now() - dt.timedelta(days=1))
    for flavor, price in per_flavor.items():
        price_set(actor=None, book=book, sku=f"flavor:name={getattr(world, flavor).name}", sla_tier="standard",
                  pricing_model="on_demand", unit_price=Decimal(price))


@pytest.mark.usefixtures("tiers")
def test_placeable_instance_answers_placeable_with_quota_and_price_and_writes_nothing(world):
    gpu_host(gpus=2)
    _prices(world, gpu1="2.75")
    before = _rows()
    r = world.client_a.post(INSTANCE, create_body(world, world.gpu1), format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    assert (body["placeable"], body["code"], body["reason"], body["earliest_start"]) == (True, None, None, None)
    assert body["queue"] == {"would_queue": False, "position": None}
    gpus = [q for q in body["quota"] if q["resource"] == "gpus" and q["scope"] == "organization"]
    assert gpus == [{"resource": "gpus", "scope": "organization", "limit": 8, "used": 0, "requested": 1,
                     "exceeded": False}]
    assert {q["resource"] for q in body["quota"]} >= {"instances", "vcpus", "memory_mib", "gpus"}
    assert body["price"] == {"currency": "USD", "sla_tier": "standard", "pricing_model": "on_demand",
                             "sku": "flavor:name=g1-h100", "unit": "hour", "unit_price": "2.75", "units": "1",
                             "per_hour": "2.75", "hours": None, "estimate_total": None}
    assert _rows() == before
    # and the create agrees
    assert world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json").status_code == 202


def test_quota_exceeded_is_the_code_the_create_gives_with_the_lines(world):
    gpu_host(gpus=2)
    Quota.objects.update_or_create(organization=world.org_a, project=None, resource="gpus", defaults={"limit": 0})
    before = _rows()
    r = world.client_a.post(INSTANCE, create_body(world, world.gpu1), format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    assert (body["placeable"], body["code"], body["reason"]) == (False, "quota_exceeded", "gpus")
    assert {"resource": "gpus", "scope": "organization", "limit": 0, "used": 0, "requested": 1,
            "exceeded": True} in body["quota"]
    assert body["price"]["per_hour"] is None            # no price book prices this flavor
    assert _rows() == before
    create = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
    assert (create.status_code, create.json()["code"]) == (422, "quota_exceeded")


def test_instance_no_host_could_hold_is_unplaceable_with_the_rule_s_explanation(world):
    gpu_host(gpus=1, model="A100-SXM4-80GB")
    r = world.client_a.post(INSTANCE, create_body(world, world.gpu1), format="json")
    body = r.json()
    assert (body["placeable"], body["code"]) == (False, "unplaceable")
    assert body["reason"] and body["explanation"]["hosts_considered"] >= 1
    create = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
    assert (create.json()["code"], create.json()["reason"]) == ("unplaceable", body["reason"])


def test_cluster_no_topology_could_hold_is_unplaceable_topology_and_writes_nothing(world):
    _cabled_hosts(2, gpus=1)
    before = _rows()
    r = world.client_a.post(CLUSTER, cluster_body(world, 3), format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    assert (body["placeable"], body["code"], body["reason"]) == (False, "unplaceable", "topology")
    assert "only 2 suitable hosts for 3" in str(body["explanation"])
    assert body["queue"] == {"would_queue": False, "position": None}
    assert _rows() == before


def test_capacity_later_gives_earliest_start_the_create_would_give(world):
    a, _b = _cabled_hosts(2, gpus=1)
    _hold(world, a, hours=2)
    end = Allocation.objects.get(host=a).period.upper
    before = _rows()
    r = world.client_a.post(CLUSTER, cluster_body(world, 2), format="json")
    body = r.json()
    assert (body["placeable"], body["code"]) == (False, "capacity_unavailable")
    assert dt.datetime.fromisoformat(body["earliest_start"]) == end
    assert _rows() == before
    create = world.client_a.post("/api/v1/clusters/", cluster_body(world, 2), format="json")
    assert (create.status_code, create.json()["earliest_start"]) == (409, body["earliest_start"])


def test_instance_that_would_queue_says_so_with_its_position_and_earliest_start(world):
    host = gpu_host(gpus=1)
    _hold(world, host, hours=3)
    end = Allocation.objects.get(host=host).period.upper
    before = _rows()
    r = world.client_a.post(INSTANCE, create_body(world, world.gpu1, queue=True), format="json")
    body = r.json()
    assert (body["placeable"], body["code"]) == (False, None)            # the create would answer 202, queued
    assert body["queue"] == {"would_queue": True, "position": 1}
    assert dt.datetime.fromisoformat(body["earliest_start"]) == end
    assert body["explanation"]["hosts_considered"] == 1
    assert _rows() == before
    # one request waits: the next one would be second
    assert world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1, queue=True),
                               format="json").status_code == 202
    again = world.client_a.post(INSTANCE, create_body(world, world.gpu1, name="vm-2"), format="json").json()
    assert (again["code"], again["queue"]) == ("capacity_unavailable", {"would_queue": False, "position": 2})


def test_name_taken_is_reported_like_the_create(world):
    gpu_host(gpus=2)
    assert world.client_a.post("/api/v1/instances/", create_body(world, world.cpu), format="json").status_code == 202
    body = world.client_a.post(INSTANCE, create_body(world, world.cpu), format="json").json()
    assert (body["placeable"], body["code"]) == (False, "name_taken")


def test_viewer_gets_the_create_s_403_and_nothing_is_written(world):
    viewer = make_user("viewer@example.com")
    member(viewer, world.org_a, OrgRole.VIEWER)
    client = client_for(token_for(viewer, organization=world.org_a))
    before = _rows()
    for path, body in ((INSTANCE, create_body(world, world.cpu)), (CLUSTER, cluster_body(world, 1))):
        check = client.post(path, body, format="json")
        create = client.post(path.removesuffix("check/"), body, format="json")
        assert check.status_code == create.status_code == 403
        assert check.json()["code"] == create.json()["code"]
    assert _rows() == before
    # the refused creates are in the audit log; the checks (dry runs) are not
    assert sorted(AuditEvent.objects.filter(action="api.request.refused").values_list("target_id", flat=True)) == [
        CLUSTER.removesuffix("check/"), INSTANCE.removesuffix("check/")]


@pytest.mark.parametrize("member_name", ["flavor", "image", "project"])
def test_another_tenant_s_reference_answers_like_a_random_id(world, member_name):
    theirs = {"flavor": world.private_b.pk, "image": None, "project": world.project_b.pk}[member_name]
    for value in filter(None, [theirs, new_uuid()]):
        r = world.client_a.post(INSTANCE, {**create_body(world, world.cpu), member_name: str(value)}, format="json")
        assert r.status_code == 400, r.content
        assert r.headers["Content-Type"].startswith("application/problem+json")
        assert (r.json()["code"], r.json()["errors"]) == ("validation_error", {member_name: ["Not found."]})


def test_bad_body_is_the_create_s_400(world):
    body = {**create_body(world, world.cpu), "name": "Not_A_Hostname", "surprise": 1}
    check = world.client_a.post(INSTANCE, body, format="json")
    create = world.client_a.post("/api/v1/instances/", body, format="json")
    assert check.status_code == create.status_code == 400
    assert check.json()["errors"] == create.json()["errors"]


@pytest.mark.usefixtures("tiers")
def test_flavor_list_carries_what_the_wizard_shows_with_the_org_s_hourly_prices(world):
    _prices(world, gpu1="2.75", mig="0.9")
    book = price_book_create(actor=None, name="spot", currency="USD", effective_from=clock.now() - dt.timedelta(hours=1))
    price_set(actor=None, book=book, sku="gpu:model=H100-SXM5-80GB", sla_tier="standard", pricing_model="spot",
              unit_price=Decimal("1.40"))
    r = world.client_a.get("/api/v1/flavors/")
    assert r.status_code == 200
    rows = {f["name"]: f for f in r.json()["results"]}
    assert "b-only" not in rows                                                 # org B's private flavor
    gpu1, mig, cpu = rows["g1-h100"], rows["mig-3g40"], rows["c2"]
    assert (gpu1["gpu_form"], gpu1["gpu_model"], gpu1["gpu_count"]) == ("gpu", "H100-SXM5-80GB", 1)
    assert (mig["gpu_form"], mig["mig_profile"], mig["vgpu_type"]) == ("mig", "3g.40gb", "")
    org = str(world.org_a.pk)
    assert gpu1["prices"] == [{"organization": org, "currency": "USD", "sla_tier": "standard",
                               "on_demand_per_hour": "2.75", "spot_per_hour": "1.4"}]
    assert mig["prices"][0]["on_demand_per_hour"] == "0.9"
    assert mig["prices"][0]["spot_per_hour"] == "0.6"                           # 3 of 7 slices × 1.40
    assert cpu["prices"][0]["on_demand_per_hour"] is None and cpu["prices"][0]["spot_per_hour"] is None
    # the detail carries the same prices; org B sees its own private flavor with its own organization
    assert world.client_a.get(f"/api/v1/flavors/{world.gpu1.pk}/").json()["prices"] == gpu1["prices"]
    b_only = world.client_b.get(f"/api/v1/flavors/{world.private_b.pk}/").json()
    assert [p["organization"] for p in b_only["prices"]] == [str(world.org_b.pk)]


@pytest.mark.usefixtures("tiers")
def test_check_prices_the_instance_at_the_tier_it_would_be_bought_at(world):
    gpu_host(gpus=2)
    _prices(world, gpu1="2.75")
    price_set(actor=None, book=price_book_create(actor=None, name="premium", currency="USD",
                                                 effective_from=clock.now() - dt.timedelta(days=2)),
              sku=f"flavor:name={world.gpu1.name}", sla_tier="premium", pricing_model="on_demand",
              unit_price=Decimal("4.00"))
    r = world.client_a.post(INSTANCE, {**create_body(world, world.gpu1), "sla_tier": "premium"}, format="json")
    assert r.status_code == 200, r.content
    assert (r.json()["price"]["sla_tier"], r.json()["price"]["per_hour"]) == ("premium", "4")
    r = world.client_a.post(INSTANCE, {**create_body(world, world.gpu1), "sla_tier": "gold"}, format="json")
    assert (r.status_code, r.json()["code"]) == (400, "unknown_sla_tier")


@pytest.mark.usefixtures("tiers")
def test_a_flavor_alone_is_checked_before_the_name_and_image_are_chosen(world):
    """The launch wizard asks as soon as a flavor is chosen: `name` and `image` left out are not checked; the
    placement, quota and price are the full check's. What is given is still checked."""
    gpu_host(gpus=1)
    _prices(world, gpu1="2.75")
    before = _rows()
    flavor_only = {"project": str(world.project_a.pk), "flavor": str(world.gpu1.pk)}
    r = world.client_a.post(INSTANCE, flavor_only, format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    full = world.client_a.post(INSTANCE, create_body(world, world.gpu1), format="json").json()
    assert body == full
    assert (body["placeable"], body["price"]["per_hour"]) == (True, "2.75")
    r = world.client_a.post(INSTANCE, {**flavor_only, "name": "", "image": None}, format="json")
    assert r.status_code == 200 and r.json()["placeable"] is True
    # what is given is checked as the create checks it
    bad = world.client_a.post(INSTANCE, {**flavor_only, "name": "not a hostname!"}, format="json")
    assert bad.status_code == 400 and "name" in bad.json().get("errors", {}), bad.content
    missing = world.client_a.post(INSTANCE, {**flavor_only, "image": new_uuid()}, format="json")
    assert missing.status_code == 400 and "image" in missing.json()["errors"]
    assert _rows() == before
    # and the create still needs both
    create = world.client_a.post("/api/v1/instances/", flavor_only, format="json")
    assert create.status_code == 400 and {"name", "image"} <= set(create.json()["errors"])
