"""Concurrent claims with real threads and real transactions (each thread its own connection)."""
import threading
import uuid

import pytest
from django.db import connection, connections

from apps.scheduling.errors import CapacityUnavailable
from apps.scheduling.ledger import AllocationSpec, ConsumerRef, allocations_claim
from apps.scheduling.models import Allocation

from . import fleet

pytestmark = pytest.mark.django_db(transaction=True)

OVERLAPS_SQL = """
SELECT count(*) FROM scheduling_allocation a JOIN scheduling_allocation b
  ON a.id < b.id AND a.gpu_id = b.gpu_id AND a.slices && b.slices AND a.period && b.period
 AND a.consumer_type <> 'lease' AND b.consumer_type <> 'lease'
"""


def _race(n, fn):
    barrier = threading.Barrier(n)
    results = [None] * n

    def run(i):
        try:
            barrier.wait()
            results[i] = fn(i)
        except CapacityUnavailable as exc:
            results[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_exactly_one_of_n_wins_the_last_gpu():
    p = fleet.project("c")
    h = fleet.host(gpus=1)
    g = h.gpus.get()
    results = _race(8, lambda i: allocations_claim(
        consumer=ConsumerRef(uuid.uuid4(), "instance", p.id),
        specs=[AllocationSpec(h.id, "gpu", gpu_id=g.id)]))
    wins = [r for r in results if isinstance(r, list)]
    losses = [r for r in results if isinstance(r, CapacityUnavailable)]
    assert (len(wins), len(losses)) == (1, 7)
    assert all(e.code == "capacity_unavailable" for e in losses)
    assert Allocation.objects.count() == 1


def test_concurrent_vcpu_sums_never_overbook():
    p = fleet.project("c")
    h = fleet.host(gpus=1, threads=20)
    results = _race(6, lambda i: allocations_claim(
        consumer=ConsumerRef(uuid.uuid4(), "instance", p.id), specs=[AllocationSpec(h.id, "vcpu", amount=8)]))
    assert sum(isinstance(r, list) for r in results) == 2
    assert sum(a.amount for a in Allocation.objects.all()) == 16


def test_concurrent_gangs_crossing_hosts_do_not_deadlock_or_overlap():
    """Gangs listing the same hosts in opposite orders: host locks in id order, no deadlock; each GPU once."""
    p = fleet.project("c")
    hosts = [fleet.host(gpus=2) for _ in range(3)]
    gpus = [list(h.gpus.order_by("index")) for h in hosts]

    def gang(i):
        order = hosts if i % 2 else list(reversed(hosts))
        specs = [AllocationSpec(h.id, "gpu", gpu_id=gpus[hosts.index(h)][i % 2].id) for h in order]
        return allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "cluster_member", p.id), specs=specs)

    results = _race(6, gang)
    assert sum(isinstance(r, list) for r in results) == 2
    with connection.cursor() as cur:
        cur.execute(OVERLAPS_SQL)
        assert cur.fetchone()[0] == 0
    assert Allocation.objects.count() == 6


def test_placement_claim_race_for_the_last_gpu_one_winner_rest_capacity_unavailable():
    """Through the placement service (place, then claim, retry on conflict): 10 racers, one free GPU in the
    fleet; exactly one wins and every other gets capacity_unavailable with an explanation."""
    from apps.scheduling.placement import PlacementRequest
    from apps.scheduling.services import placement_claim

    p = fleet.project("c")
    hosts = [fleet.host(gpus=2, nvswitch="") for _ in range(2)]
    for h in hosts:
        for g in h.gpus.all():
            if (h, g.index) != (hosts[1], 1):
                allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", p.id),
                                  specs=[AllocationSpec(h.id, "gpu", gpu_id=g.id)])
    req = PlacementRequest(project_id=p.id, gpus_per_host=1)
    results = _race(10, lambda i: placement_claim(actor=None, request=req,
                                                  consumers=ConsumerRef(uuid.uuid4(), "instance", p.id)))
    losses = [r for r in results if isinstance(r, CapacityUnavailable)]
    assert len(losses) == 9 and len(results) - len(losses) == 1
    assert all(f["filter"] == "gpu_capacity" and f["removed"] == 2
               for e in losses for f in e.explanation["filters"] if f["removed"])
    with connection.cursor() as cur:
        cur.execute(OVERLAPS_SQL)
        assert cur.fetchone()[0] == 0
