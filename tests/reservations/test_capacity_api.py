"""GET /capacity: free GPUs and hosts by model, zone and time; tenants see what they could reserve (after the
on-demand reserve), staff see totals and the breakdown."""
import pytest

from apps.core.clock import now as clock_now
from apps.reservations.models import OnDemandReserve
from apps.scheduling.models import Allocation

from .conftest import at, flavor8, gpu_host, lease

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
    assert world.client_a.get("/api/v1/capacity-reserves").status_code == 404
    bad = world.staff_client.post("/api/v1/capacity-reserves", {"gpu_model": "NOPE", "gpus": 2}, format="json")
    assert bad.status_code == 400
    assert bad.json()["errors"] == {"gpu_model": ["not a GPU model of the catalog"]}  # only the field at fault
    rows = world.client_a.get("/api/v1/capacity", Q).json()
    assert rows[0]["free_gpus"] == 6


def _profiles(row, form):
    return {p["profile"]: p["free"] for p in row["profiles"] if p["form"] == form}


def test_calendar_shows_mig_vgpu_and_share_capacity_of_a_fractional_fleet(world, clock):
    gpu_host(model="H200-SXM-141GB", mode="mig")          # 8 H200 in MIG mode, nothing exclusive
    gpu_host(model="H200-SXM-141GB", mode="shared", gpus=2)
    gpu_host(model="H200-SXM-141GB", mode="vgpu", gpus=1)
    mig = lease(world.project_b, start=at(10), end=at(12), kind="mig", gpu_model="H200-SXM-141GB",
                mig_profile="3g.71gb", count=2)
    lease(world.project_b, start=at(11), end=at(12), kind="shares", gpu_model="H200-SXM-141GB", share_milli=250,
          count=2, name="l2")
    rows = world.client_a.get("/api/v1/capacity", {**Q, "gpu_model": "H200-SXM-141GB"}).json()
    assert [(r["start"][11:16], r["free_gpus"], r["free_hosts"]) for r in rows] == [
        ("09:00", 0, 0), ("10:00", 0, 0), ("11:00", 0, 0), ("12:00", 0, 0)]
    idle, busy = _profiles(rows[0], "mig"), _profiles(rows[1], "mig")
    assert (idle["1g.18gb"], idle["3g.71gb"], idle["7g.141gb"]) == (56, 16, 8)
    gpus_used = len({a.gpu_id for a in Allocation.objects.filter(consumer_id=mig.pk)})
    assert gpus_used == 1  # both 3g.71gb on one GPU: the MIG planner fills it
    assert (busy["1g.18gb"], busy["3g.71gb"], busy["7g.141gb"]) == (49, 14, 7)
    assert _profiles(rows[3], "mig") == idle
    assert [_profiles(r, "share") for r in rows] == [{"": 2000}, {"": 2000}, {"": 1500}, {"": 2000}]
    assert _profiles(rows[0], "vgpu")["H200X-70C"] == 2 and _profiles(rows[0], "vgpu")["H200X-1-18C"] == 7
    by_form = {p["form"]: p["gpus"] for p in rows[0]["profiles"]}
    assert by_form == {"mig": 8, "share": 2, "vgpu": 1}
    assert "total" not in rows[0]["profiles"][0]
    staff = world.staff_client.get("/api/v1/capacity", {**Q, "gpu_model": "H200-SXM-141GB"}).json()
    share = next(p for p in staff[2]["profiles"] if p["form"] == "share")
    assert (share["free"], share["total"], staff[2]["total_gpus"]) == (1500, 2000, 0)


def test_calendar_keeps_whole_gpus_and_adds_profiles_of_mixed_hosts(world, clock):
    gpu_host()
    h = gpu_host()
    h.gpus.filter(index__gte=4).update(mode="mig")
    rows = world.client_a.get("/api/v1/capacity", Q).json()
    assert (rows[0]["free_gpus"], rows[0]["free_hosts"]) == (12, 2)
    assert _profiles(rows[0], "mig")["3g.40gb"] == 8


def test_staff_see_the_fleet_s_fragmentation_and_the_queue(world, clock):
    """Two 8-GPU hosts; an instance holds 5 GPUs of the first. The typical request is then 5 GPUs: the first host's
    3 free GPUs are stranded, the second's 8 are not. One request waits 30 min for 8 GPUs. Tenants get 404."""
    import datetime as dt
    import uuid

    from apps.inventory.models import Gpu
    from apps.reservations.models import QueuedRequest
    from apps.scheduling.ledger.core import AllocationSpec, ConsumerRef, allocations_claim

    first, second = sorted((gpu_host(), gpu_host()), key=lambda h: h.name)
    gpus = list(Gpu.objects.filter(host=first).order_by("index"))[:5]
    allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", world.project_a.pk),
                      specs=[AllocationSpec(host_id=first.pk, resource_class="gpu", gpu_id=g.pk)
                             for g in gpus])
    figures = world.staff_client.get("/api/v1/capacity/fleet-figures/").json()
    (row,) = figures["fragmentation"]
    assert (row["free_gpus"], row["fragmented_gpus"], row["largest_free_block"], row["hosts"]) == (11, 3.0, 8, 2)
    assert row["fragmentation_pct"] == 27.3
    assert figures["queue"]["waiting"] == 0 and figures["queue"]["longest_wait_s"] is None
    # the same GPUs counted in the heat map's states: 16, 5 held; a faulty GPU and a cordoned host show up
    (count,) = figures["gpus"]
    assert (count["total"], count["allocated"], count["faulty"], count["out_of_service"]) == (16, 5, 0, 0)
    Gpu.objects.filter(host=second, index=0).update(health="faulty")
    type(second).objects.filter(pk=second.pk).update(state="cordoned")
    (count,) = world.staff_client.get("/api/v1/capacity/fleet-figures/").json()["gpus"]
    assert (count["total"], count["allocated"], count["faulty"], count["out_of_service"]) == (16, 5, 1, 8)
    type(second).objects.filter(pk=second.pk).update(state="available")
    Gpu.objects.filter(host=second, index=0).update(health="ok")
    from apps.compute.models import Instance
    instance = Instance.objects.create(project=world.project_b, name="q1", flavor=flavor8(), image=world.image)
    QueuedRequest.objects.create(project=world.project_b, organization=world.project_b.organization,
                                 instance=instance, gpus=8, expires_at=clock_now() + dt.timedelta(hours=2))
    clock.shift(dt.timedelta(minutes=30))
    queue = world.staff_client.get("/api/v1/capacity/fleet-figures/").json()["queue"]
    assert (queue["waiting"], queue["waiting_gpus"], queue["longest_wait_s"]) == (1, 8, 1800)
    # the waiting 8-GPU request is typical too: the first host's 3 GPUs fit neither request
    assert world.staff_client.get("/api/v1/capacity/fleet-figures/").json()["fragmentation"][0][
        "fragmented_gpus"] == 3.0
    assert world.client_a.get("/api/v1/capacity/fleet-figures/").status_code == 404


def test_fleet_figures_count_every_gpu_as_the_heat_map_shows_it(world):
    """The capacity screen's counts (one aggregate query) and the heat map's cells (every GPU read) agree for GPUs
    in each state: faulty wins over a scrub and an allocation, a scrub over an allocation; MIG and vGPU modes; a
    host of two models counts under the first name; a cordoned host is out of service; a retired one is left
    out; two zones."""
    import uuid

    from apps.inventory.models import Gpu, Host
    from apps.scheduling.ledger.core import AllocationSpec, ConsumerRef, allocations_claim
    from apps.scheduling.selectors import fleet_gpu_counts, fleet_summary
    from tests.inventory.helpers import make_host
    from tests.tenancy.helpers import make_user

    a, b = make_host("fig-a", gpus=8, zone="z-fig-1"), make_host("fig-b", gpus=4, zone="z-fig-2", model="L40S")
    mixed = make_host("fig-mixed", gpus=2, zone="z-fig-1", model="H200-SXM-141GB")
    Gpu.objects.create(host=mixed, index=2, model="A100-SXM4-80GB", uuid="GPU-fig-mixed-2", serial="G-fig-mixed-2",
                       pci_address="0000:30:00.0")
    make_host("fig-retired", gpus=8, zone="z-fig-1", state="retired")
    make_host("fig-cordoned", gpus=2, zone="z-fig-2", state="cordoned", model="L40S")
    gpus = list(Gpu.objects.filter(host=a).order_by("index"))
    allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", world.project_a.pk),
                      specs=[AllocationSpec(host_id=a.pk, resource_class="gpu", gpu_id=g.pk) for g in gpus[:4]])
    Gpu.objects.filter(pk=gpus[0].pk).update(health="faulty", scrub_state="dirty")    # faulty, held
    Gpu.objects.filter(pk=gpus[1].pk).update(scrub_state="scrub_failed")              # scrubbing, held
    Gpu.objects.filter(pk=gpus[5].pk).update(scrub_state="dirty")                     # scrubbing
    Gpu.objects.filter(pk=gpus[6].pk).update(health="faulty")                         # faulty
    Gpu.objects.filter(host=a, index=7).update(mode="mig")
    Gpu.objects.filter(host=b).update(mode="vgpu")

    heat = fleet_summary(make_user("fig-ops@example.com", staff_role="operator"))
    expected: dict = {}
    for region in heat["regions"]:
        for zone in region["zones"]:
            for rack in zone["racks"]:
                for host in rack["hosts"]:
                    key = (host["gpu_model"].split("/")[0], zone["name"])
                    row = expected.setdefault(key, dict.fromkeys(
                        ("total", "allocated", "faulty", "scrubbing", "out_of_service", "mig", "vgpu"), 0))
                    for g in host["gpus"]:
                        row["total"] += 1
                        row["allocated"] += g["state"] == "allocated"
                        row["faulty"] += g["state"] == "faulty"
                        row["scrubbing"] += g["state"] in ("dirty", "scrub_failed")
                        row["out_of_service"] += host["condition"] != "available"
                        row["mig"] += g["mode"] == "mig"
                        row["vgpu"] += g["mode"] == "vgpu"
    counts = {(r["gpu_model"], r["zone"]): {k: v for k, v in r.items() if k not in ("gpu_model", "zone")}
              for r in fleet_gpu_counts() if r["zone"].startswith("z-fig")}
    assert counts == {k: v for k, v in expected.items() if k[1].startswith("z-fig")}
    assert counts[("H100-SXM5-80GB", "z-fig-1")] == {"total": 8, "allocated": 2, "faulty": 2, "scrubbing": 2,
                                                    "out_of_service": 0, "mig": 1, "vgpu": 0}
    assert counts[("A100-SXM4-80GB", "z-fig-1")]["total"] == 3            # fig-mixed, under its first model name
    assert counts[("L40S", "z-fig-2")] == {"total": 6, "allocated": 0, "faulty": 0, "scrubbing": 0,
                                          "out_of_service": 2, "mig": 0, "vgpu": 4}
    assert [(r["gpu_model"], r["zone"]) for r in fleet_gpu_counts()] == sorted(
        (r["gpu_model"], r["zone"]) for r in fleet_gpu_counts())
    assert Host.objects.filter(name="fig-retired", state="retired").exists()
