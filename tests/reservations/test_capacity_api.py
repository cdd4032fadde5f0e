"""GET /capacity: free GPUs and hosts by model, zone and time; tenants see what they could reserve (after the
on-demand reserve), staff see totals and the breakdown."""
import pytest

from apps.reservations.models import OnDemandReserve

from .conftest import at, gpu_host, lease

pytestmark = pytest.mark.django_db
Q = {"start": "2026-03-01T09:00:00Z", "end": "2026-03-01T13:00:00Z", "step_s": 3600}


def test_calendar_for_tenants_and_staff(world, clock):
    gpu_host(), gpu_host()
    gpu_host(state="cordoned")
    OnDemandReserve.objects.create(gpu_model="H100-SXM5-80GB", gpus=2)
    lease(world.project_b, start=at(10), end=at(12), kind="hosts", count=1)
    rows = world.client_a.get("/api/v1/capacity", Q).json()
    assert [(r["start"][11:16], r["free_gpus"], r["free_hosts"]) for r in rows] == [
        ("09:00", 14, 2), ("10:00", 6, 1), ("11:00", 6, 1), ("12:00", 14, 2)]
    assert "total_gpus" not in rows[0]
    staff = world.staff_client.get("/api/v1/capacity", Q).json()
    assert (staff[1]["total_gpus"], staff[1]["leased_gpus"], staff[1]["reserve_gpus"]) == (16, 8, 2)
    assert world.client_a.get("/api/v1/capacity", {**Q, "gpu_model": "B200"}).json() == []


def test_calendar_bad_input(world):
    r = world.client_a.get("/api/v1/capacity", {**Q, "end": "2026-03-01T08:00:00Z"})
    assert r.status_code == 400
    r = world.client_a.get("/api/v1/capacity", {**Q, "end": "2027-03-01T08:00:00Z", "step_s": 300})
    assert r.status_code == 400
    assert world.client_a.get("/api/v1/capacity", {"start": "x"}).status_code == 400


def test_staff_sets_the_reserve_over_the_api(world, clock):
    gpu_host()
    r = world.staff_client.post("/api/v1/capacity-reserves", {"gpu_model": "H100-SXM5-80GB", "gpus": 6},
                                format="json")
    assert r.status_code == 201, r.content
    r = world.staff_client.post("/api/v1/capacity-reserves", {"gpu_model": "H100-SXM5-80GB", "gpus": 2},
                                format="json")
    assert r.status_code == 201 and OnDemandReserve.objects.get().gpus == 2
    assert world.client_a.get("/api/v1/capacity-reserves").status_code == 403
    bad = world.staff_client.post("/api/v1/capacity-reserves", {"gpu_model": "NOPE", "gpus": 2}, format="json")
    assert bad.status_code == 400
    assert bad.json()["errors"] == {"gpu_model": ["not a GPU model of the catalog"]}  # only the field at fault
    rows = world.client_a.get("/api/v1/capacity", Q).json()
    assert rows[0]["free_gpus"] == 6
