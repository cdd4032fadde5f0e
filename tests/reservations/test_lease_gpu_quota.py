"""GPU quotas over a lease's window (docs/adr/0802-lease-gpu-quota.md): a GPU quota limits what a project and its
organization hold at once, so a lease is checked against the peak held over its window and an on-demand instance
(no end) against the peak from now on, confirmed leases to come included.

Why: a tenant whose organization may hold 8 GPUs confirmed a lease of 500 H100s for the next week, because only
the number of leases was counted; and a tenant with a lease for next week could launch on-demand GPUs beside it
and hold twice its quota once the lease started.
"""
import datetime as dt

import pytest

from apps.reservations.models import Lease
from apps.reservations.services.leases import leases_advance
from apps.scheduling.models import Allocation
from apps.tenancy.models import Quota

from .conftest import at, gpu_host, lease

pytestmark = pytest.mark.django_db
NOW = dt.datetime(2026, 3, 1, 8, 0, 30, tzinfo=dt.UTC)


@pytest.fixture
def now(clock):
    clock.move_to(NOW)
    return clock


@pytest.fixture
def fleet():
    """Three 8-GPU H100 hosts: capacity is never what refuses in these tests, the quota is."""
    return [gpu_host() for _ in range(3)]


def _gpus_quota(org, limit: int) -> None:
    """The organization may hold `limit` GPUs at once (and up to 10 leases, so only the GPUs limit)."""
    Quota.objects.update_or_create(organization=org, project=None, resource="gpus", defaults={"limit": limit})
    Quota.objects.update_or_create(organization=org, project=None, resource="leases", defaults={"limit": 10})


def _body(w, start, end, count, **kw):
    return {"project": str(w.project_a.pk), "name": kw.pop("name", "l1"), "kind": "gpus",
            "gpu_model": "H100-SXM5-80GB", "count": count, "start": start.isoformat(), "end": end.isoformat(), **kw}


def _rows():
    return Lease.objects.count(), Allocation.objects.count()


def test_a_lease_larger_than_the_gpu_quota_is_refused_and_writes_nothing(world, now, fleet):
    _gpus_quota(world.org_a, 8)
    before = _rows()
    r = world.client_a.post("/api/v1/leases", _body(world, at(12), at(15), 16), format="json")
    assert r.status_code == 422, r.content
    body = r.json()
    assert (body["code"], body["resource"], body["limit"], body["usage"], body["requested"]) == \
        ("quota_exceeded", "gpus", 8, 0, 16)
    assert "busiest moment of the window" in body["detail"]
    assert _rows() == before
    # within the quota the same lease is confirmed
    r = world.client_a.post("/api/v1/leases", _body(world, at(12), at(15), 8), format="json")
    assert r.status_code == 201, r.content


def test_the_check_counts_the_peak_over_the_window_not_the_sum(world, now, fleet):
    _gpus_quota(world.org_a, 8)
    lease(world.project_a, start=at(9), end=at(12), count=4, name="a")
    lease(world.project_a, start=at(12), end=at(15), count=4, name="b")
    # overlaps both, but at no instant do more than 4 + 4 run
    lease(world.project_a, start=at(11), end=at(13), count=4, name="c")
    # 11:30-12:30 would meet a and c at 11:30: 4 + 4 + 1 > 8
    r = world.client_a.post("/api/v1/leases", _body(world, at(11, 30), at(12, 30), 1, name="d"), format="json")
    assert (r.status_code, r.json()["code"], r.json()["usage"]) == (422, "quota_exceeded", 8)
    # after 15:00 all have ended: the full quota is free again
    assert world.client_a.post("/api/v1/leases", _body(world, at(15), at(16), 8, name="e"),
                               format="json").status_code == 201


def test_another_tenants_leases_do_not_count(world, now, fleet):
    _gpus_quota(world.org_a, 8)
    _gpus_quota(world.org_b, 8)
    lease(world.project_a, start=at(9), end=at(12), count=8)
    r = world.client_b.post("/api/v1/leases", {**_body(world, at(9), at(12), 8), "project": str(world.project_b.pk)},
                            format="json")
    assert r.status_code == 201, r.content


def test_an_on_demand_gpu_and_a_later_lease_cannot_together_pass_the_quota(world, now, fleet):
    _gpus_quota(world.org_a, 8)
    lease(world.project_a, start=at(12), end=at(15), count=8)
    body = {"project": str(world.project_a.pk), "name": "vm-1", "flavor": str(world.gpu1.pk),
            "image": str(world.image.pk)}
    # nothing is held now, but an instance with no end would still hold its GPU when the lease starts at 12:00
    r = world.client_a.post("/api/v1/instances", body, format="json")
    assert (r.status_code, r.json()["code"], r.json()["usage"]) == (422, "quota_exceeded", 8), r.content
    assert "from now on" in r.json()["detail"]
    # with one GPU of room over the lease, the instance is accepted; then a lease of 1 more is refused
    _gpus_quota(world.org_a, 9)
    assert world.client_a.post("/api/v1/instances", body, format="json").status_code == 202
    r = world.client_a.post("/api/v1/leases", _body(world, at(13), at(14), 1, name="l2"), format="json")
    assert (r.status_code, r.json()["code"], r.json()["usage"]) == (422, "quota_exceeded", 9)


def test_moving_or_growing_a_lease_is_checked_and_a_refusal_leaves_it_as_it_was(world, now, fleet):
    _gpus_quota(world.org_a, 8)
    lease(world.project_a, start=at(9), end=at(12), count=4, name="a")
    b = lease(world.project_a, start=at(12), end=at(15), count=4, name="b")
    rows = sorted(Allocation.objects.filter(consumer_id=b.pk).values_list("gpu_id", flat=True))
    r = world.client_a.patch(f"/api/v1/leases/{b.pk}", {"count": 5}, format="json")   # 12:00-15:00 alone: fits
    assert r.status_code == 200, r.content
    r = world.client_a.patch(f"/api/v1/leases/{b.pk}", {"start": at(11).isoformat()}, format="json")
    assert (r.status_code, r.json()["code"]) == (422, "quota_exceeded")           # 4 + 5 at 11:00
    b.refresh_from_db()
    assert (b.start, b.count, Allocation.objects.filter(consumer_id=b.pk).count()) == (at(12), 5, 5)
    assert len(rows) == 4


def test_a_started_lease_extended_into_another_is_refused(world, now, fleet):
    _gpus_quota(world.org_a, 8)
    a = lease(world.project_a, start=at(9), end=at(12), count=8, name="a")
    lease(world.project_a, start=at(12), end=at(15), count=8, name="b")
    now.move_to(at(9))
    leases_advance()
    a.refresh_from_db()
    assert a.status == "active"
    r = world.client_a.patch(f"/api/v1/leases/{a.pk}", {"end": at(13).isoformat()}, format="json")
    assert (r.status_code, r.json()["code"]) == (422, "quota_exceeded"), r.content
    a.refresh_from_db()
    assert a.end == at(12)
    assert {row.period.upper for row in Allocation.objects.filter(consumer_id=a.pk)} == {at(12)}
    # growing it now: 8 + 1 at once > 8
    r = world.client_a.patch(f"/api/v1/leases/{a.pk}", {"count": 9}, format="json")
    assert (r.status_code, r.json()["code"], r.json()["requested"]) == (422, "quota_exceeded", 1), r.content
    a.refresh_from_db()
    assert (a.count, Allocation.objects.filter(consumer_id=a.pk).count()) == (8, 8)


def test_the_launch_check_reports_the_gpu_quota_over_the_window(world, now, fleet):
    _gpus_quota(world.org_a, 8)
    lease(world.project_a, start=at(9), end=at(12), count=6, name="a")
    before = _rows()
    r = world.client_a.post("/api/v1/leases/check/", _body(world, at(10), at(11), 4, name="b"), format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    assert (body["placeable"], body["code"], body["reason"]) == (False, "quota_exceeded", "gpus")
    gpus = [line for line in body["quota"] if line["resource"] == "gpus"]
    assert gpus == [{"resource": "gpus", "scope": "organization", "limit": 8, "used": 6, "requested": 4,
                     "exceeded": True}]
    assert _rows() == before
    ok = world.client_a.post("/api/v1/leases/check/", _body(world, at(12), at(13), 4, name="b"), format="json").json()
    assert ok["placeable"] is True
    assert [line["used"] for line in ok["quota"] if line["resource"] == "gpus"] == [0]
