"""The spare pool: hosts staff mark as spares take no on-demand, spot, queued (windowed) or lease placement, and
count in no capacity view; the staff API that marks them is audited."""
import datetime as dt
import uuid

import pytest

from apps.audit.models import AuditEvent
from apps.core import clock
from apps.identity.models import StaffRole
from apps.inventory.models import Host
from apps.inventory.services.hosts import host_spare_set
from apps.reservations.selectors import fleet_fragmentation
from apps.scheduling.errors import CapacityUnavailable
from apps.scheduling.models import Allocation
from apps.scheduling.placement import PlacementRequest, place
from apps.scheduling.services import placement_claim
from tests.tenancy.helpers import client_for, make_user, token_for

from . import fleet

pytestmark = pytest.mark.django_db
DAY = dt.timedelta(days=1)


def req(p, **kw):
    kw.setdefault("gpus_per_host", 1)
    return PlacementRequest(project_id=p.id, **kw)


def consumer(p, kind="instance"):
    from apps.scheduling.ledger import ConsumerRef

    return ConsumerRef(uuid.uuid4(), kind, p.id)


@pytest.mark.parametrize("shape", ["on_demand", "on_demand_exact", "spot", "window", "lease"])
def test_a_spare_host_is_never_placed_on(shape):
    p = fleet.project("a")
    spare = fleet.host(nvswitch="")
    host_spare_set(actor=None, host=spare, spare=True, reason="spare pool")
    start = clock.now() + DAY
    kw = {
        "on_demand": {},
        "on_demand_exact": {"host_id": spare.id},  # the exact path, as a pinned request takes
        "spot": {"spot": True},
        "window": {"start": start, "end": start + DAY},  # a queued / future request's window
        "lease": {"consumer_type": "lease", "gpus_per_host": 8, "start": start, "end": start + DAY},
    }[shape]
    with pytest.raises(CapacityUnavailable) as e:
        placement_claim(actor=None, request=req(p, **kw), consumers=consumer(p, kw.get("consumer_type", "instance")))
    assert not Allocation.objects.exists()
    explained = place(req(p, **kw), explain=True).explanation
    assert {f["filter"]: f for f in explained["filters"]}["host_state"]["reasons"] == {"spare": 1}
    assert e.value.code == "capacity_unavailable"
    host_spare_set(actor=None, host=spare, spare=False, reason="back in service")
    placed = placement_claim(actor=None, request=req(p, **kw), consumers=consumer(p, kw.get("consumer_type",
                                                                                           "instance")))
    assert placed.candidate.hosts[0].host_id == spare.id  # the same request lands once it is out of the pool


def test_spares_count_in_no_capacity_view():
    fleet.host(nvswitch="")
    spare = fleet.host(nvswitch="")
    assert sum(r["free_gpus"] for r in fleet_fragmentation()) == 16
    host_spare_set(actor=None, host=spare, spare=True, reason="spare pool")
    assert sum(r["free_gpus"] for r in fleet_fragmentation()) == 8


def test_staff_mark_and_unmark_a_spare_through_the_api_audited():
    ops = client_for(token_for(make_user("ops@provider.test", staff_role=StaffRole.OPERATOR), staff=True))
    host = fleet.host(nvswitch="")
    url = f"/api/v1/hosts/{host.pk}/spare/"
    assert ops.post(url, {"spare": True}, format="json").status_code == 400  # a reason is required
    body = ops.post(url, {"spare": True, "reason": "spare pool"}, format="json").json()
    assert body["spare"] is True and Host.objects.get(pk=host.pk).spare
    assert ops.post(url, {"spare": True, "reason": "again"}, format="json").status_code == 200  # idempotent
    assert ops.post(url, {"spare": False, "reason": "out"}, format="json").json()["spare"] is False
    audits = list(AuditEvent.objects.filter(action="inventory.host.spare", target_id=str(host.pk))
                  .order_by("id").values_list("after", flat=True))
    assert [a["spare"] for a in audits] == [True, False]
    Host.objects.filter(pk=host.pk).update(state="retired")
    resp = ops.post(url, {"spare": True, "reason": "x"}, format="json")
    assert resp.status_code == 409 and resp.json()["code"] == "host_retired"


def test_a_lease_move_to_another_host_is_all_or_nothing():
    from apps.scheduling.ledger import allocations_move_host

    p = fleet.project("a")
    h1, h2, h3 = fleet.host(nvswitch=""), fleet.host(nvswitch=""), fleet.host(nvswitch="")
    start = clock.now()
    le = consumer(p, "lease")
    placement_claim(actor=None, request=req(p, gpus_per_host=8, consumer_type="lease", start=start,
                                            end=start + DAY, host_id=h1.id), consumers=le)
    placement_claim(actor=None, request=req(p, host_id=h2.id), consumers=consumer(p))  # one GPU of h2 is taken
    old = {a.gpu_id: a for a in Allocation.objects.filter(consumer_id=le.id)}
    to_h2 = dict(zip(sorted(old, key=lambda g: old[g].gpu.index), h2.gpus.order_by("index").values_list("pk", flat=True),
                     strict=True))
    with pytest.raises(CapacityUnavailable):
        allocations_move_host(consumer_id=le.id, from_host_id=h1.id, to_host_id=h2.id, gpu_map=to_h2)
    assert {a.host_id for a in Allocation.objects.filter(consumer_id=le.id)} == {h1.id}  # nothing changed
    assert all(a.period.upper == start + DAY for a in Allocation.objects.filter(consumer_id=le.id))
    to_h3 = dict(zip(sorted(old, key=lambda g: old[g].gpu.index), h3.gpus.order_by("index").values_list("pk", flat=True),
                     strict=True))
    at = clock.now()
    rows = allocations_move_host(consumer_id=le.id, from_host_id=h1.id, to_host_id=h3.id, gpu_map=to_h3, at=at)
    assert len(rows) == len(old) and {r.host_id for r in rows} == {h3.id}
    assert {r.period.upper for r in rows} == {start + DAY}
    assert {a.period.upper for a in Allocation.objects.filter(consumer_id=le.id, host=h1)} == {at}
