"""`POST /leases/check/`: what the lease create with the same body would answer - confirmed now, or the code,
reason and explanation of the placement rule or the quota, the earliest start of the same window length, and
the reserved price over the window - without writing anything (docs/adr/0405-launch-checks.md).

Why: a lease create that cannot get its capacity leaves a `rejected` lease behind; the console's wizard and the
Terraform provider's `plan` need the answer (and the price) without that row, and it must be the create's own.
"""
import datetime as dt
from decimal import Decimal

import pytest

from apps.audit.models import AuditEvent
from apps.billing.services.catalog import price_book_create, price_set
from apps.compute.models import Instance
from apps.operations.models import Operation
from apps.reservations.models import Lease
from apps.scheduling.models import Allocation
from apps.tenancy.models import OrgRole, Quota
from tests.billing.conftest import tiers  # noqa: F401  (fixture)
from tests.tenancy.helpers import client_for, make_user, member, token_for

from .conftest import at, gpu_host, lease
from .test_placement_rule import _body

pytestmark = pytest.mark.django_db
NOW = dt.datetime(2026, 3, 1, 10, 0, 45, tzinfo=dt.UTC)
CHECK = "/api/v1/leases/check/"


@pytest.fixture
def now(clock):
    clock.move_to(NOW)
    return clock


def _rows() -> tuple[int, ...]:
    return (Lease.objects.count(), Instance.objects.count(), Allocation.objects.count(), Operation.objects.count(),
            AuditEvent.objects.count())


@pytest.mark.usefixtures("tiers")
def test_lease_that_fits_is_placeable_with_the_reserved_price_over_its_window(world, now):
    gpu_host()
    book = price_book_create(actor=None, name="list", currency="USD", effective_from=at(0))
    price_set(actor=None, book=book, sku="gpu:model=H100-SXM5-80GB", sla_tier="standard", pricing_model="reserved",
              unit_price=Decimal("2.10"))
    before = _rows()
    r = world.client_a.post(CHECK, _body(world, count=2), format="json")       # 2 GPUs, 12:00-15:00
    assert r.status_code == 200, r.content
    body = r.json()
    assert (body["placeable"], body["code"], body["earliest_start"]) == (True, None, None)
    assert body["queue"] == {"would_queue": False, "position": None}
    assert body["quota"] == [{"resource": "leases", "scope": "organization", "limit": 2, "used": 0, "requested": 1,
                              "exceeded": False},
                             {"resource": "gpus", "scope": "organization", "limit": 8, "used": 0, "requested": 2,
                              "exceeded": False}]
    assert body["price"] == {"currency": "USD", "sla_tier": "standard", "pricing_model": "reserved",
                             "sku": "gpu:model=H100-SXM5-80GB", "unit": "hour", "unit_price": "2.1", "units": "2",
                             "per_hour": "4.2", "hours": "3", "estimate_total": "12.60"}
    assert _rows() == before
    assert world.client_a.post("/api/v1/leases", _body(world, count=2), format="json").status_code == 201


def test_lease_over_quota_is_quota_exceeded_as_the_create(world, now):
    gpu_host()
    Quota.objects.filter(organization=world.org_a, project=None, resource="leases").update(limit=0)
    before = _rows()
    body = world.client_a.post(CHECK, _body(world), format="json").json()
    assert (body["placeable"], body["code"], body["reason"]) == (False, "quota_exceeded", "leases")
    assert body["quota"][0]["exceeded"] is True
    assert _rows() == before
    assert world.client_a.post("/api/v1/leases", _body(world), format="json").json()["code"] == "quota_exceeded"


@pytest.mark.parametrize(("extra", "reason"), [
    ({"count": 9}, "gpu_capacity"),
    ({"kind": "hosts", "count": 2}, "topology"),
])
def test_lease_the_fleet_could_never_hold_is_unplaceable(world, now, extra, reason):
    gpu_host()
    before = _rows()
    body = world.client_a.post(CHECK, _body(world, **extra), format="json").json()
    assert (body["placeable"], body["code"], body["reason"]) == (False, "unplaceable", reason)
    assert _rows() == before


def test_lease_that_collides_says_when_it_fits_and_leaves_no_rejected_lease(world, now):
    gpu_host(gpus=1, nvswitch="")
    lease(world.project_b, start=at(11), end=at(14), count=1, name="other")
    before = _rows()
    body = world.client_a.post(CHECK, _body(world), format="json").json()            # 12:00-15:00 wanted
    assert (body["placeable"], body["code"]) == (False, "capacity_unavailable")
    assert body["earliest_start"] == at(14).isoformat()
    assert body["reason"] and body["explanation"]
    assert _rows() == before                                                         # no `rejected` lease
    create = world.client_a.post("/api/v1/leases", _body(world), format="json").json()
    assert (create["code"], create["earliest_start"]) == ("capacity_unavailable", body["earliest_start"])


def test_viewer_is_refused_like_the_create(world, now):
    gpu_host()
    viewer = make_user("viewer@example.com")
    member(viewer, world.org_a, OrgRole.VIEWER)
    client = client_for(token_for(viewer, organization=world.org_a))
    check = client.post(CHECK, _body(world), format="json")
    create = client.post("/api/v1/leases", _body(world), format="json")
    assert check.status_code == create.status_code == 403
    assert Lease.objects.count() == 0


def test_another_tenant_s_project_answers_like_a_random_id(world, now):
    for project in (world.project_b.pk, "0190a0a0-0000-7000-8000-000000000000"):
        r = world.client_a.post(CHECK, {**_body(world), "project": str(project)}, format="json")
        assert (r.status_code, r.json()["errors"]) == (400, {"project": ["Not found."]})


def test_bad_window_is_the_create_s_400(world, now):
    body = _body(world, start="2026-03-01 15:00", end="2026-03-01 12:00")
    check = world.client_a.post(CHECK, body, format="json")
    create = world.client_a.post("/api/v1/leases", body, format="json")
    assert check.status_code == create.status_code == 400
    assert check.json()["code"] == create.json()["code"]
