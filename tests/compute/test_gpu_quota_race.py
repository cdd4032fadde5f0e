"""The GPU quota is checked and held in the create request's transaction, like the instance count. Before, the
GPU count came only from the allocation ledger, which an instance enters when a worker places it: 30 parallel
creates against a GPU quota of 8 all saw 0 GPUs in use and gave 18 x 202 (and more) for work that could never
run; the workers then refused everything past the 8th. Real threads, each with its own PostgreSQL connection."""
import pytest

from apps.compute.models import Instance
from apps.operations.models import Operation
from apps.tenancy.models import Quota
from apps.tenancy.quotas import usage_of
from gpucloud.celery import app as celery_app
from tests.operations.helpers import drive
from tests.parallel import outcome, post_parallel

from .conftest import create_body, gpu_host

pytestmark = pytest.mark.django_db(transaction=True)
N, LIMIT = 30, 8


@pytest.fixture
def queued_tasks():
    """Tasks go to the broker (this test's Redis database) as with a worker that has not picked them up yet."""
    celery_app.conf.task_always_eager = False
    yield
    celery_app.conf.task_always_eager = True


def test_thirty_parallel_creates_against_a_gpu_quota_of_eight(world, queued_tasks):
    gpu_host(), gpu_host()  # 16 GPUs: the quota, not the fleet, is the limit
    Quota.objects.filter(organization=world.org_a).update(limit=10**9)
    Quota.objects.update_or_create(organization=world.org_a, project=None, resource="gpus",
                                   defaults={"limit": LIMIT})
    bodies = [create_body(world, world.gpu1, name=f"vm-{i}") for i in range(N)]
    responses = post_parallel(world.client_a, "/api/v1/instances/", bodies)
    assert outcome(responses) == {(202, None): LIMIT, (422, "quota_exceeded"): N - LIMIT}
    refused = [r.json() for r in responses if r.status_code == 422]
    assert {(b["resource"], b["limit"]) for b in refused} == {("gpus", LIMIT)}
    assert Instance.objects.filter(project=world.project_a).count() == LIMIT
    assert usage_of(organization=world.org_a, resource="gpus") == LIMIT  # held before any placement

    # every accepted create can run: the placement's re-check passes and the ledger takes over the count
    for op in Operation.objects.filter(kind="instance.create"):
        drive(op.pk, max_steps=2)
    assert Instance.objects.filter(project=world.project_a, host__isnull=False).count() == LIMIT
    assert not Operation.objects.filter(kind="instance.create", status="failed").exists()
    assert usage_of(organization=world.org_a, resource="gpus") == LIMIT
    extra = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1, name="vm-late"), format="json")
    assert (extra.status_code, extra.json()["code"]) == (422, "quota_exceeded")
