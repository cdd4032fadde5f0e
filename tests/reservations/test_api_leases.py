"""The /leases API: the lease cases of docs/cases.md (RW-031 dates, RW-032 updates, RW-034 IDOR, RW-035 grow),
daylight-saving windows, and the 409 explanation."""
import datetime as dt

import pytest

from apps.reservations.models import Lease
from apps.reservations.services.leases import leases_advance
from apps.scheduling.models import Allocation
from tests.billing.conftest import tiers  # noqa: F401  (fixture)

from .conftest import at, gpu_host, lease

pytestmark = pytest.mark.django_db
NOW = dt.datetime(2026, 3, 1, 10, 0, 45, tzinfo=dt.UTC)


def body(w, **kw):
    return {"project": str(w.project_a.pk), "name": "l1", "kind": "gpus", "gpu_model": "H100-SXM5-80GB",
            "count": 1, **kw}


@pytest.fixture
def now(clock):
    clock.move_to(NOW)
    return clock


@pytest.mark.parametrize(("start", "end", "status", "code"), [
    ("2026-03-01 09:59", "2026-03-01 11:00", 400, "lease_start_in_past"),         # (a)
    ("2026-03-01 10:00", "2026-03-01 11:00", 201, None),                          # (b) same minute
    ("now", "now", 400, "invalid_lease_window"),                                  # (c)
    ("2026-03-01 11:00", "2026-03-01 11:00", 400, "invalid_lease_window"),        # (d)
    ("2026-03-01T11:00:00+02:00", "2026-03-01 12:00", 400, "lease_start_in_past"),  # (e) = 09:00 UTC
    ("2026-03-01 12:00", "2026-03-01 11:00", 400, "invalid_lease_window"),        # (f)
    ("tomorrow 9am", "2026-03-01 11:00", 400, "invalid_lease_window"),            # format, never 500
    ("2026-03-02 10:00", "9999-12-31T00:00:00Z", 400, "lease_too_long"),          # no 8000-year holds
])
def test_rw031_lease_dates(world, now, start, end, status, code):
    gpu_host()
    r = world.client_a.post("/api/v1/leases", body(world, start=start, end=end), format="json")
    assert r.status_code == status, r.content
    if code:
        assert r.json()["code"] == code
        assert not Lease.objects.exists()
    else:
        assert r.json()["start"] == "2026-03-01T10:00:00Z"


def test_now_start_is_the_current_minute(world, now):
    gpu_host()
    r = world.client_a.post("/api/v1/leases", body(world, start="now", end="2026-03-01 11:00"), format="json")
    assert r.status_code == 201
    assert r.json()["start"] == "2026-03-01T10:00:00Z"


def test_windows_are_correct_across_daylight_saving(world, now):
    gpu_host()
    # Europe/Berlin switches to CEST on 2026-03-29 02:00 local: noon to noon is 23 hours
    r = world.client_a.post("/api/v1/leases", body(world, start="2026-03-28 12:00", end="2026-03-29 12:00",
                                                   time_zone="Europe/Berlin"), format="json")
    assert r.status_code == 201, r.content
    le = Lease.objects.get(pk=r.json()["id"])
    assert (le.start.isoformat(), le.end.isoformat()) == ("2026-03-28T11:00:00+00:00", "2026-03-29T10:00:00+00:00")
    assert le.end - le.start == dt.timedelta(hours=23)
    a = Allocation.objects.filter(consumer_id=le.pk).first()
    assert (a.period.lower, a.period.upper) == (le.start, le.end)
    # a wall-clock time in the spring-forward gap, or one that occurs twice, needs an explicit offset
    for start in ("2026-03-08 02:30", "2026-11-01 01:30"):
        r = world.client_a.post("/api/v1/leases", body(world, name="x", start=start, end="2026-11-02 09:00",
                                                       time_zone="America/New_York"), format="json")
        assert r.status_code == 400 and r.json()["code"] == "invalid_lease_window", r.content
    r = world.client_a.post("/api/v1/leases", body(world, name="y", start="2026-11-01T01:30:00-05:00",
                                                   end="2026-11-01 09:00", time_zone="America/New_York"),
                            format="json")
    assert r.status_code == 201 and r.json()["start"] == "2026-11-01T06:30:00Z"


def test_back_to_back_over_the_api(world, now):
    gpu_host(gpus=1, nvswitch="")
    for name, s, e in (("a", "2026-03-01 12:00", "2026-03-01 15:00"), ("b", "2026-03-01 15:00", "2026-03-01 18:00")):
        r = world.client_a.post("/api/v1/leases", body(world, name=name, start=s, end=e), format="json")
        assert r.status_code == 201, r.content
    r = world.client_b.post("/api/v1/leases", {**body(world, name="c", start="2026-03-01 14:59",
                                                     end="2026-03-01 15:01"), "project": str(world.project_b.pk)},
                            format="json")
    assert r.status_code == 409
    assert r.json()["code"] == "capacity_unavailable" and r.json()["constraint"] == "gpu_capacity"
    assert r.json()["lease"] == str(Lease.objects.get(name="c").pk)


@pytest.fixture
def active(world, clock):
    """RW-032: L active since 09:00, ends 12:00; now 10:00; one 8-GPU host."""
    gpu_host()
    le = lease(world.project_a, start=at(9), end=at(12))
    clock.move_to(at(9))
    leases_advance()
    clock.move_to(at(10))
    le.refresh_from_db()
    assert le.status == "active"
    return le


def _patch(w, le, **data):
    return w.client_a.patch(f"/api/v1/leases/{le.pk}", data, format="json")


def _unchanged(le, status="active"):
    fresh = Lease.objects.get(pk=le.pk)
    assert (fresh.status, fresh.start, fresh.end) == (status, le.start, le.end)


def test_rw032_started_lease_updates(world, active):
    le = active
    r = _patch(world, le, start="2026-03-01 09:30")  # (a)
    assert r.status_code == 400 and r.json()["code"] == "lease_field_immutable"
    r = _patch(world, le, end="2026-03-01 09:55")  # (b)
    assert r.status_code == 400
    r = _patch(world, le, end="2026-03-01 09:00")  # end == start
    assert r.status_code == 400
    _unchanged(le)  # (f)
    r = _patch(world, le, end="2026-03-01 14:00")  # (c) capacity allows
    assert r.status_code == 200, r.content
    assert r.json()["end"] == "2026-03-01T14:00:00Z"
    assert set(Allocation.objects.filter(consumer_id=le.pk).values_list("period", flat=True)) == {
        Allocation.objects.filter(consumer_id=le.pk).first().period}
    assert Allocation.objects.filter(consumer_id=le.pk).first().period.upper == at(14)


def test_rw032_extension_refused_when_capacity_is_taken(world, active):
    other = lease(world.project_b, start=at(12), end=at(15), name="next")
    r = world.client_a.post(f"/api/v1/leases/{active.pk}/extend", {"end": "2026-03-01 14:00"}, format="json")
    assert r.status_code == 409 and r.json()["code"] == "capacity_unavailable"
    _unchanged(active)
    assert Allocation.objects.filter(consumer_id=active.pk).first().period.upper == at(12)
    assert Allocation.objects.filter(consumer_id=other.pk).count() == 8


def test_rw032_shrink_and_future_and_finished(world, active, clock):
    r = world.client_a.post(f"/api/v1/leases/{active.pk}/shrink", {"end": "2026-03-01 11:00"}, format="json")
    assert r.status_code == 200 and r.json()["end"] == "2026-03-01T11:00:00Z"
    assert Allocation.objects.filter(consumer_id=active.pk).first().period.upper == at(11)
    m = lease(world.project_a, start=at(15), end=at(16), name="m")
    r = _patch(world, m, start="2026-03-01 09:00")  # (d) future lease moved into the past
    assert r.status_code == 400 and r.json()["code"] == "lease_start_in_past"
    _unchanged(m, "confirmed")
    r = _patch(world, m, start="2026-03-01 16:00", end="2026-03-01 18:00")  # a future lease may move
    assert r.status_code == 200
    assert Allocation.objects.filter(consumer_id=m.pk).first().period.lower == at(16)
    clock.move_to(at(11))
    leases_advance()
    r = _patch(world, active, end="2026-03-01 13:00")  # (e) finished: only rename
    assert r.status_code == 400 and r.json()["code"] == "lease_field_immutable"
    r = _patch(world, active, name="renamed")
    assert r.status_code == 200 and r.json()["name"] == "renamed" and r.json()["status"] == "ended"


def test_rw034_other_projects_lease_is_404_and_unchanged(world, clock):
    gpu_host()
    le = lease(world.project_a, start=at(9), end=at(12))
    for method in ("patch", "delete"):
        r = getattr(world.client_b, method)(f"/api/v1/leases/{le.pk}", {"end": "2026-03-01 13:00"}, format="json")
        assert r.status_code == 404
    for verb in ("cancel", "extend", "shrink"):
        assert world.client_b.post(f"/api/v1/leases/{le.pk}/{verb}", {"end": "2026-03-01 13:00"},
                                   format="json").status_code == 404
    _unchanged(le, "confirmed")
    assert Allocation.objects.filter(consumer_id=le.pk).count() == 8


@pytest.mark.usefixtures("reserved_capacity")
def test_rw035_growing_an_active_host_lease_wires_the_new_host_in(world, clock):
    hosts = [gpu_host() for _ in range(3)]
    le = lease(world.project_a, kind="hosts", count=2, start=at(9), end=at(12))
    clock.move_to(at(9))
    leases_advance()
    clock.move_to(at(10))
    r = _patch(world, le, count=3)
    assert r.status_code == 200, r.content
    held = set(Allocation.objects.filter(consumer_id=le.pk).values_list("host_id", flat=True))
    assert held == {h.id for h in hosts}
    new_host = next(h for h in hosts if Allocation.objects.filter(consumer_id=le.pk, host_id=h.id,
                                                                  period__startswith=at(10)).exists())
    assert Allocation.objects.filter(consumer_id=le.pk, host_id=new_host.id).count() == 8


def test_lists_use_a_bounded_number_of_queries(world, clock, django_assert_max_num_queries):
    from apps.tenancy.models import Quota

    Quota.objects.filter(organization=world.org_a, project=None, resource="leases").update(limit=100)
    gpu_host()
    for i in range(6):
        lease(world.project_a, start=at(9 + i), end=at(10 + i), count=1, name=f"l{i}")
    with django_assert_max_num_queries(12):
        r = world.client_a.get("/api/v1/leases")
    assert r.status_code == 200 and len(r.json()["results"]) == 6
    with django_assert_max_num_queries(14):
        assert world.client_a.get("/api/v1/queued-requests").status_code == 200


def test_lease_list_filters_by_window_overlap(world, now):
    """`since`/`until` (a calendar's range): the leases whose [start, end) overlaps it, touching ends excluded."""
    gpu_host()
    for name, start, end in (("march", "2026-03-02 00:00", "2026-03-05 00:00"),
                             ("april", "2026-04-01 00:00", "2026-04-03 00:00")):
        r = world.client_a.post("/api/v1/leases", body(world, name=name, start=start, end=end), format="json")
        assert r.status_code == 201, r.content

    def names(**query):
        r = world.client_a.get("/api/v1/leases", query)
        assert r.status_code == 200, r.content
        return sorted(x["name"] for x in r.json()["results"])

    assert names(since="2026-03-01T00:00:00Z", until="2026-04-01T00:00:00Z") == ["march"]
    assert names(since="2026-03-04T00:00:00Z") == ["april", "march"]
    assert names(since="2026-03-05T00:00:00Z", until="2026-04-01T00:00:00Z") == []
    assert names(until="2026-03-02T00:00:01Z") == ["march"]
    assert world.client_a.get("/api/v1/leases", {"since": "next week"}).status_code == 400


def test_lease_sla_tier_is_stored_and_answered_and_an_unknown_tier_writes_nothing(world, now, tiers):  # noqa: F811
    """A tenant buys a lease at a tier of its choice: ``premium`` is kept on the lease and answered (the create's
    body and a later read); a tier no `SlaTier` has is 400 `unknown_sla_tier` naming the field, and no lease, no
    ledger row and no audit event is written."""
    from apps.audit.models import AuditEvent

    gpu_host()
    assert world.org_a.default_sla_tier == "standard"
    r = world.client_a.post("/api/v1/leases", body(world, start="2026-03-01 11:00", end="2026-03-01 12:00",
                                                   sla_tier="premium"), format="json")
    assert r.status_code == 201, r.content
    assert r.json()["sla_tier"] == "premium"
    assert Lease.objects.get(pk=r.json()["id"]).sla_tier == "premium"
    assert world.client_a.get(f"/api/v1/leases/{r.json()['id']}").json()["sla_tier"] == "premium"

    leases, rows, events = Lease.objects.count(), Allocation.objects.count(), AuditEvent.objects.count()
    r = world.client_a.post("/api/v1/leases", body(world, name="l2", start="2026-03-01 12:00",
                                                   end="2026-03-01 13:00", sla_tier="platinum"), format="json")
    assert r.status_code == 400, r.content
    assert r["Content-Type"].startswith("application/problem+json")
    assert r.json()["code"] == "unknown_sla_tier" and "sla_tier" in r.json()["errors"]
    assert (Lease.objects.count(), Allocation.objects.count(), AuditEvent.objects.count()) == (leases, rows, events)
