"""A cluster created with `queue: true` is one entry of the on-demand queue (ADR 0801, ADR 0404), placed
all-or-nothing, in the same order as instances (priority, fair share, age), with its position in
`GET /queued-requests` like an instance's.

Before, a queued cluster waited in its own operation (re-placing itself every `COMPUTE_CAPACITY_POLL_S`) outside
the ordered queue: when capacity freed, the queue placed any later instance at once and the cluster, first in
line, found the hosts taken again, for as long as instances kept arriving."""
import datetime as dt

import pytest

from apps.compute.models import Cluster, Instance
from apps.core import clock
from apps.operations.models import Operation
from apps.reservations.models import QueuedRequest
from apps.reservations.services.queue import queue_process
from apps.scheduling.ledger import allocations_release
from tests.compute.conftest import create_body, drive
from tests.compute.test_clusters import _body, _cabled_hosts
from tests.compute.test_placement_rule import _hold

pytestmark = pytest.mark.django_db


def _queued_cluster_and_instance(world):
    a, b = _cabled_hosts(2, gpus=1)
    holders = [_hold(world, a, hours=None), _hold(world, b, hours=None)]
    resp = world.client_a.post("/api/v1/clusters/", {**_body(world, 2), "queue": True}, format="json")
    assert resp.status_code == 201, resp.content
    cluster = Cluster.objects.get(pk=resp.json()["id"])
    later = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1, name="small", queue=True),
                                format="json")
    assert later.status_code == 202, later.content
    return cluster, Instance.objects.get(pk=later.json()["instance"]["id"]), holders


def test_a_queued_cluster_is_one_entry_of_the_queue_with_its_position(world):
    cluster, inst, _holders = _queued_cluster_and_instance(world)
    entry = QueuedRequest.objects.get(cluster=cluster)
    assert (entry.status, entry.instance_id, entry.gpus) == ("waiting", None, 2)
    rows = {(r["cluster"], r["instance"]): r for r in world.client_a.get("/api/v1/queued-requests").json()["results"]}
    assert rows[(str(cluster.pk), None)]["position"] == 1
    assert rows[(None, str(inst.pk))]["position"] == 2
    op = drive(Operation.objects.get(kind="cluster.create").pk, max_steps=3)
    assert (op.status, op.step) == ("running", "claim_members")        # it waits in the queue, not by itself


def test_when_capacity_frees_the_queue_places_the_earlier_cluster_before_a_later_instance(world):
    cluster, inst, holders = _queued_cluster_and_instance(world)
    for h in holders:
        allocations_release(consumer_id=h)
    assert queue_process()["placed"] == 1
    assert QueuedRequest.objects.get(cluster=cluster).status == "placed"
    assert QueuedRequest.objects.get(instance=inst).status == "waiting"
    assert cluster.members.exclude(host=None).count() == 2             # the whole gang, at once
    assert drive(Operation.objects.get(kind="cluster.create").pk).status == "succeeded"
    inst.refresh_from_db()
    assert inst.host_id is None


def test_a_queued_cluster_that_expires_fails_with_queue_expired(world):
    cluster, _inst, _holders = _queued_cluster_and_instance(world)
    QueuedRequest.objects.filter(cluster=cluster).update(expires_at=clock.now() - dt.timedelta(seconds=1))
    assert queue_process()["expired"] >= 1
    op = drive(Operation.objects.get(kind="cluster.create").pk)
    cluster.refresh_from_db()
    assert (op.status, op.error_code, cluster.status) == ("failed", "queue_expired", "error")
