"""Concurrent creates in one project never deadlock and never answer 500 (real threads, each with its own
PostgreSQL connection). Before the lock order was fixed, 10 parallel lease creates in one project gave 8-9 × 500
"deadlock detected": the confirm transaction locked the lease row with ``select_related`` and so also the project
and organization rows, while other creates held the organization's quota lock and needed the project row at
commit. 15 leases and 15 instances in parallel gave 500s too, and a lease stayed `requested`."""
import pytest

from apps.operations.models import Operation
from apps.operations.runner import operation_run_step
from apps.reservations.models import Lease
from apps.tenancy.models import Quota
from gpucloud.celery import app as celery_app
from tests.parallel import client_like, outcome, post_parallel, run_parallel

from .conftest import gpu_host

pytestmark = pytest.mark.django_db(transaction=True)
WINDOW = {"start": "2099-01-01 09:00", "end": "2099-01-01 12:00"}


@pytest.fixture
def queued_tasks():
    """Tasks go to the broker (this test's Redis database) instead of running inline, as with a real worker that
    has not picked them up yet; the test runs the steps itself."""
    celery_app.conf.task_always_eager = False
    yield
    celery_app.conf.task_always_eager = True


def _unlimited(org):
    Quota.objects.filter(organization=org).update(limit=10**9)


def _lease_body(w, i, **kw):
    return {"project": str(w.project_a.pk), "name": f"l{i}", "kind": "gpus", "gpu_model": "H100-SXM5-80GB",
            "count": 8, **WINDOW, **kw}


def test_ten_parallel_lease_creates_in_one_project(world):
    for _ in range(4):
        gpu_host()
    _unlimited(world.org_a)
    responses = post_parallel(world.client_a, "/api/v1/leases", [_lease_body(world, i) for i in range(10)])
    # 4 hosts of 8 GPUs hold exactly 4 whole-host leases in one window
    assert outcome(responses) == {(201, None): 4, (409, "capacity_unavailable"): 6}
    assert sorted(Lease.objects.values_list("status", flat=True)) == ["confirmed"] * 4 + ["rejected"] * 6


def test_fifteen_leases_and_fifteen_instances_in_parallel(world, queued_tasks):
    from apps.compute.models import Flavor

    for _ in range(4):
        gpu_host()
    for _ in range(2):
        gpu_host(model="A100-SXM4-40GB")
    a100 = Flavor.objects.create(name="g1-a100", vcpus=4, memory_mib=16384, disk_gib=50, gpu_form="gpu",
                                 gpu_model="A100-SXM4-40GB", gpu_count=1)
    _unlimited(world.org_a)
    bodies = [_lease_body(world, i) if i % 2 else
              {"project": str(world.project_a.pk), "name": f"vm-{i}", "flavor": str(a100.pk),
               "image": str(world.image.pk)} for i in range(30)]
    responses = run_parallel(30, lambda i: client_like(world.client_a).post("/api/v1/leases" if i % 2 else "/api/v1/instances/", bodies[i], format="json"))
    assert outcome(responses) == {(201, None): 4, (409, "capacity_unavailable"): 11, (202, None): 15}
    assert not Lease.objects.filter(status="requested").exists()
    assert Lease.objects.filter(status="confirmed").count() == 4

    # the workers' first step (quota re-check, placement, claim) for all 15 at once, next to new lease creates
    ops = list(Operation.objects.filter(kind="instance.create").values_list("pk", flat=True))
    assert len(ops) == 15
    more = [_lease_body(world, 100 + i, start="2099-02-01 09:00", end="2099-02-01 12:00") for i in range(5)]

    def work(i):
        if i < len(ops):
            return operation_run_step(ops[i])
        return client_like(world.client_a).post(
            "/api/v1/leases", more[i - len(ops)], format="json")

    results = run_parallel(len(ops) + len(more), work)
    assert [r for r in results if isinstance(r, Exception)] == []
    assert outcome(results[len(ops):]) == {(201, None): 4, (409, "capacity_unavailable"): 1}
    failed = Operation.objects.filter(kind="instance.create", status="failed")
    assert {code for code in failed.values_list("error_code", flat=True)} <= {"capacity_unavailable"}
    assert not Lease.objects.filter(status="requested").exists()
