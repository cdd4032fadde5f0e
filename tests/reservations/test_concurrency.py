"""Two overlapping leases requested at the same time on the same capacity: exactly one is confirmed (real
threads, real PostgreSQL transactions; the ledger's exclusion constraint decides)."""
import threading

import pytest
from django.db import connection

from apps.reservations.models import Lease
from apps.scheduling.errors import CapacityUnavailable
from apps.scheduling.models import Allocation
from tests.scheduling import fleet

from .conftest import lease

pytestmark = pytest.mark.django_db(transaction=True)


def _race(projects, *, refused=CapacityUnavailable, **kw):
    """Each project asks for the lease `kw` at the same instant (a thread each); {project slug: the lease's
    status, or the code of the `refused` error it got}."""
    barrier = threading.Barrier(len(projects))
    results = {}

    def run(p):
        try:
            barrier.wait()
            results[p.slug] = lease(p, name=f"race-{p.slug}", **kw).status
        except refused as exc:
            results[p.slug] = exc.code
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(p,)) for p in projects]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


@pytest.mark.parametrize("kind,count", [("gpus", 8), ("hosts", 1)])
def test_concurrent_overlapping_leases_only_one_confirmed(kind, count):
    fleet.host()
    projects = [fleet.project(f"c{i}") for i in range(4)]
    results = _race(projects, kind=kind, count=count, start="2099-01-01 09:00", end="2099-01-01 12:00")
    assert sorted(results.values()) == ["capacity_unavailable"] * 3 + ["confirmed"]
    assert Lease.objects.filter(status="confirmed").count() == 1
    assert Lease.objects.filter(status="rejected").count() == 3
    winner = Lease.objects.get(status="confirmed")
    assert Allocation.objects.filter(consumer_type="lease").count() == 8
    assert set(Allocation.objects.filter(consumer_type="lease").values_list("consumer_id", flat=True)) == {winner.pk}


def test_concurrent_partial_overlaps_on_two_hosts_never_double_book():
    fleet.host(), fleet.host()
    projects = [fleet.project(f"d{i}") for i in range(5)]
    _race(projects, kind="hosts", count=1, start="2099-01-01 09:00", end="2099-01-01 12:00")
    assert Lease.objects.filter(status="confirmed").count() == 2
    with connection.cursor() as cur:
        cur.execute("""SELECT count(*) FROM scheduling_allocation a JOIN scheduling_allocation b
                       ON a.gpu_id = b.gpu_id AND a.id < b.id AND a.period && b.period
                       WHERE a.parent_id IS NULL AND b.parent_id IS NULL""")
        assert cur.fetchone()[0] == 0


def test_concurrent_leases_of_one_organization_never_pass_its_gpu_quota():
    """Four projects of one organization, each asking at the same instant for 4 GPUs over the same window, with an
    organization quota of 8 GPUs and room in the fleet for 24: two are confirmed, the others refused for quota (no
    GPU held for them), never three (docs/adr/0802-lease-gpu-quota.md)."""
    from apps.core.errors import QuotaExceeded
    from apps.tenancy.models import Organization, Project, Quota

    for _ in range(3):
        fleet.host()
    org = Organization.objects.create(slug="org-race", name="race")
    Quota.objects.create(organization=org, project=None, resource="gpus", limit=8)
    Quota.objects.create(organization=org, project=None, resource="leases", limit=10)
    projects = [Project.objects.create(organization=org, slug=f"q{i}", name=f"q{i}") for i in range(4)]
    results = _race(projects, refused=QuotaExceeded, kind="gpus", count=4, start="2099-01-01 09:00",
                    end="2099-01-01 12:00")
    assert sorted(results.values()) == ["confirmed"] * 2 + ["quota_exceeded"] * 2
    confirmed = set(Lease.objects.filter(status="confirmed").values_list("pk", flat=True))
    assert len(confirmed) == 2
    assert set(Allocation.objects.filter(consumer_type="lease").values_list("consumer_id", flat=True)) == confirmed
    assert Allocation.objects.filter(consumer_type="lease").count() == 8
