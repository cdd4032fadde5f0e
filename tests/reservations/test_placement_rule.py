"""The placement rule on lease creates (docs/adr/0404-placement-admission.md).

Why: a lease no capacity of the fleet could ever hold (more hosts or GPUs of a model than exist, a topology no
set of hosts meets) was written and kept as `rejected` with a 409 that read like "try later"; and a lease that
only collided with another one gave no hint of when it would fit. Now "never" is 422 `unplaceable` with nothing
written, and "not now" is the 409 with `earliest_start`: the first start (same duration) that fits.
"""
import datetime as dt

import pytest

from apps.reservations.models import Lease

from .conftest import at, gpu_host, lease

pytestmark = pytest.mark.django_db
NOW = dt.datetime(2026, 3, 1, 10, 0, 45, tzinfo=dt.UTC)


@pytest.fixture
def now(clock):
    clock.move_to(NOW)
    return clock


def _body(w, **kw):
    return {"project": str(w.project_a.pk), "name": "l1", "kind": "gpus", "gpu_model": "H100-SXM5-80GB",
            "count": 1, "start": "2026-03-01 12:00", "end": "2026-03-01 15:00", **kw}


@pytest.mark.parametrize(("extra", "reason"), [
    ({"count": 9}, "gpu_capacity"),                          # 8 H100 in the fleet
    ({"kind": "hosts", "count": 2}, "topology"),             # one host of the model
    ({"gpu_model": "A100-SXM4-80GB"}, "gpu_model"),          # a model the fleet does not have
])
def test_lease_the_fleet_could_never_hold_is_unplaceable_and_writes_nothing(world, now, extra, reason):
    gpu_host()
    r = world.client_a.post("/api/v1/leases", _body(world, **extra), format="json")
    assert r.status_code == 422, r.content
    assert (r.json()["code"], r.json()["reason"]) == ("unplaceable", reason)
    assert Lease.objects.count() == 0


def test_lease_that_collides_says_when_the_same_window_length_fits(world, now):
    gpu_host(gpus=1, nvswitch="")
    lease(world.project_b, start=at(11), end=at(14), count=1, name="other")
    r = world.client_a.post("/api/v1/leases", _body(world), format="json")      # 12:00-15:00 wanted
    assert r.status_code == 409, r.content
    assert r.json()["code"] == "capacity_unavailable"
    assert r.json()["earliest_start"] == at(14).isoformat()                   # 14:00-17:00 would fit
    assert Lease.objects.get(name="l1").status == "rejected"
    r = world.client_a.post("/api/v1/leases", _body(world, name="l2", start="2026-03-01 14:00",
                                                    end="2026-03-01 17:00"), format="json")
    assert r.status_code == 201, r.content
