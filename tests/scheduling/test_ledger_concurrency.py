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
