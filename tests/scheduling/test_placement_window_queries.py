"""Lease confirmation issues a fixed number of queries whatever the fleet and the existing leases (no N+1 in
the reservations service or the window path), and confirms through the window path."""
import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.core import clock
from apps.reservations.services.leases import lease_create
from apps.scheduling.models import Allocation
from apps.tenancy.models import Quota

from . import fleet

pytestmark = pytest.mark.django_db

HOUR = dt.timedelta(hours=1)


def _confirm(p, i: int, start: dt.datetime, kind: str = "gpus", count: int = 2) -> int:
    with CaptureQueriesContext(connection) as q:
        lease = lease_create(actor=None, project=p, name=f"q{i}", start=start, end=start + 2 * HOUR, kind=kind,
                             gpu_model="H100-SXM5-80GB", count=count)
    assert lease.status == "confirmed"
    assert Allocation.objects.filter(consumer_id=lease.pk).count() == (8 if kind == "hosts" else count)
    return len(q.captured_queries)


@pytest.mark.parametrize("kind,count", [("gpus", 2), ("hosts", 1)])
def test_lease_confirmation_query_count_does_not_grow_with_fleet_or_leases(kind, count):
    p = fleet.project("qc")
    Quota.objects.update_or_create(organization=p.organization, project=None, resource="leases",
                                   defaults={"limit": 1000})
    Quota.objects.update_or_create(organization=p.organization, project=None, resource="gpus",
                                   defaults={"limit": 1000})
    start = (clock.now() + 3 * HOUR).replace(second=0, microsecond=0)
    fleet.host()
    small = _confirm(p, 0, start, kind, count)
    for _ in range(6):
        fleet.host()
    for i in range(1, 6):  # more leases on the same window, each on capacity still free
        _confirm(p, i, start, "gpus", 1)
    large = _confirm(p, 99, start + HOUR, kind, count)
    assert large == small, "per-host or per-lease queries in lease confirmation"
    # fixed: placement and claim, plus the GPU quota checked over the window in the request and again in the
    # confirm (organization lock, plan, limits, the peak and the pending count: about 6 each)
    assert large <= 46
