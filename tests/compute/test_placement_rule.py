"""The placement rule on instance and cluster creates (docs/adr/0404-placement-admission.md).

Why: a cluster the fleet could never hold used to be accepted (201) and end in `error` later; a cluster or
instance that could not be held *now* did the same, with no hint of when it would fit; and when two clusters
raced for the same hosts, the loser ended in `error` although it only had to wait. The rule now answers before
anything is written: 422 `unplaceable` (never), 409 `capacity_unavailable` with `earliest_start` (not now), or,
with `queue: true`, waits. A race loser (admitted, then a concurrent create won the capacity) waited until the
create deadline (900 s instance, 600 s cluster) before failing; it now asks the rule again: 409
`capacity_unavailable` with `earliest_start` at once, or it joins the queue when the client asked `queue: true`.
"""
from __future__ import annotations

import datetime as dt
import uuid

import pytest

from apps.compute.models import Cluster, Instance
from apps.core import clock
from apps.inventory.models import Gpu
from apps.operations.models import Operation
from apps.reservations.models import QueuedRequest
from apps.reservations.services.queue import queue_process
from apps.scheduling.ledger import AllocationSpec, ConsumerRef, allocations_claim, allocations_release
from apps.scheduling.models import Allocation

from .conftest import create_body, drive, gpu_host
from .test_clusters import _body, _cabled_hosts

pytestmark = pytest.mark.django_db


def _hold(world, host, *, hours: float | None = 1.0) -> uuid.UUID:
    """Another consumer holds every GPU of `host` (until now + `hours`, or open-ended)."""
    cid = uuid.uuid4()
    end = clock.now() + dt.timedelta(hours=hours) if hours else None
    allocations_claim(consumer=ConsumerRef(id=cid, consumer_type="instance", project_id=world.project_b.pk),
                      specs=[AllocationSpec(host.pk, "gpu", gpu_id=g.pk) for g in Gpu.objects.filter(host=host)],
                      end=end)
    return cid


def test_cluster_no_topology_could_hold_is_unplaceable_at_once_and_writes_nothing(world):
    _cabled_hosts(2, gpus=1)
    resp = world.client_a.post("/api/v1/clusters/", _body(world, 3), format="json")
    assert resp.status_code == 422, resp.content
    body = resp.json()
    assert (body["code"], body["reason"]) == ("unplaceable", "topology")
    assert "only 2 suitable hosts for 3" in str(body["explanation"])
    assert (Cluster.objects.count(), Instance.objects.count(), Operation.objects.count()) == (0, 0, 0)


def test_cluster_that_fits_later_is_capacity_unavailable_with_earliest_start(world):
    a, _b = _cabled_hosts(2, gpus=1)
    _hold(world, a, hours=2)
    resp = world.client_a.post("/api/v1/clusters/", _body(world, 2), format="json")
    assert resp.status_code == 409, resp.content
    body = resp.json()
    assert body["code"] == "capacity_unavailable"
    end = Allocation.objects.get(host=a).period.upper
    assert dt.datetime.fromisoformat(body["earliest_start"]) == end
    assert (Cluster.objects.count(), Instance.objects.count()) == (0, 0)


def test_queued_cluster_waits_all_or_nothing_and_starts_when_capacity_frees(world):
    a, _b = _cabled_hosts(2, gpus=1)
    holder = _hold(world, a, hours=None)
    resp = world.client_a.post("/api/v1/clusters/", {**_body(world, 2), "queue": True}, format="json")
    assert resp.status_code == 201, resp.content
    op = drive(Operation.objects.get(kind="cluster.create").pk, max_steps=3)
    cluster = Cluster.objects.get(pk=resp.data["id"])
    assert (op.status, op.step, cluster.status) == ("running", "claim_members", "pending")
    assert QueuedRequest.objects.get(cluster=cluster).status == "waiting"           # an entry of the queue
    assert Allocation.objects.filter(consumer_type="cluster_member").count() == 0    # nothing half-claimed
    allocations_release(consumer_id=holder)
    queue_process()                       # the on-demand queue places it, whole (tests/reservations/test_cluster_queue.py)
    assert drive(op.pk).status == "succeeded"
    assert cluster.members.exclude(host=None).count() == 2


def _two_racing_clusters(world, **second):
    _cabled_hosts(2, gpus=1)
    first = world.client_a.post("/api/v1/clusters/", _body(world, 2, "one"), format="json")
    other = world.client_a.post("/api/v1/clusters/", {**_body(world, 2, "two"), **second}, format="json")
    assert (first.status_code, other.status_code) == (201, 201)     # both admitted: the hosts were free
    ops = {o.target_id: o for o in Operation.objects.filter(kind="cluster.create")}
    c1, c2 = Cluster.objects.get(name="one"), Cluster.objects.get(name="two")
    assert drive(ops[c1.pk].pk).status == "succeeded"
    return c1, c2, ops[c2.pk]


def test_cluster_that_loses_the_race_for_hosts_fails_at_once_with_capacity_unavailable(world):
    _c1, c2, op = _two_racing_clusters(world)
    loser = drive(op.pk, max_steps=3)
    assert (loser.status, loser.error_code) == ("failed", "capacity_unavailable")   # not after 600 s
    assert "earliest_start" in loser.error_extra and loser.error_extra["earliest_start"] is None  # open-ended
    assert Allocation.objects.filter(consumer_id__in=c2.members.values("pk")).count() == 0
    body = world.client_a.get(f"/api/v1/operations/{op.pk}").json()
    assert (body["error_code"], body["error_extra"]["earliest_start"]) == ("capacity_unavailable", None)


def test_cluster_that_loses_the_race_with_queue_waits_all_or_nothing(world):
    c1, c2, op = _two_racing_clusters(world, queue=True)
    loser = drive(op.pk, max_steps=3)
    c2.refresh_from_db()
    assert (loser.status, loser.step, c2.status) == ("running", "claim_members", "pending")   # never error
    assert "queued" in loser.state and loser.deadline_at > clock.now() + dt.timedelta(seconds=600)
    assert set(c2.members.values_list("status", flat=True)) == {"pending"}
    assert QueuedRequest.objects.get(cluster=c2).status == "waiting"     # it joined the on-demand queue
    for m in c1.members.all():
        allocations_release(consumer_id=m.pk)
    queue_process()
    assert drive(loser.pk).status == "succeeded"


def test_instance_of_a_model_the_fleet_lacks_is_unplaceable(world):
    gpu_host(gpus=8, model="A100-SXM4-80GB")
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
    assert resp.status_code == 422, resp.content
    assert (resp.json()["code"], resp.json()["reason"]) == ("unplaceable", "gpu_model")
    assert Instance.objects.count() == 0


def test_instance_not_now_answers_409_at_once_or_queues_when_asked(world):
    h = gpu_host(gpus=1)
    _hold(world, h, hours=None)                   # open-ended on-demand work: nobody knows when it ends
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
    assert resp.status_code == 409, resp.content
    assert resp.json()["code"] == "capacity_unavailable" and resp.json()["earliest_start"] is None
    assert Instance.objects.count() == 0
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1, queue=True), format="json")
    assert resp.status_code == 202, resp.content
    q = QueuedRequest.objects.get(instance_id=resp.json()["instance"]["id"])
    assert q.status == "waiting" and "no free GPU (1 host)" in q.reason


def _two_racing_instances(world, **second):
    h = gpu_host(gpus=1)
    r1 = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1, name="a"), format="json")
    r2 = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1, name="b", **second), format="json")
    assert (r1.status_code, r2.status_code) == (202, 202)      # both admitted: the GPU was free
    op_a = Operation.objects.get(kind="instance.create", target_id=r1.json()["instance"]["id"])
    op_b = Operation.objects.get(kind="instance.create", target_id=r2.json()["instance"]["id"])
    return h, op_a, op_b, r2.json()["instance"]["id"]


def test_instance_that_loses_the_race_fails_at_once_with_capacity_unavailable(world):
    _h, op_a, op_b, b = _two_racing_instances(world)
    drive(op_a.pk, max_steps=2)
    loser = drive(op_b.pk, max_steps=3)
    inst = Instance.objects.get(pk=b)
    assert (loser.status, loser.error_code, inst.status) == ("failed", "capacity_unavailable", "error")
    assert loser.error_extra["earliest_start"] is None       # the winner's work has no known end
    assert not Allocation.objects.filter(consumer_id=b).exists()


def test_instance_that_loses_the_race_to_work_with_an_end_gets_earliest_start(world):
    h, _op_a, op_b, b = _two_racing_instances(world)
    _hold(world, h, hours=2)                     # a concurrent claim took the GPU until now + 2 h
    loser = drive(op_b.pk, max_steps=3)
    assert (loser.status, loser.error_code) == ("failed", "capacity_unavailable")
    expected = clock.now() + dt.timedelta(hours=2)
    assert abs(dt.datetime.fromisoformat(loser.error_extra["earliest_start"]) - expected) < dt.timedelta(minutes=1)
    body = world.client_a.get(f"/api/v1/operations/{op_b.pk}").json()
    assert body["error_extra"]["earliest_start"] == loser.error_extra["earliest_start"]


def test_instance_that_loses_the_race_with_queue_joins_the_queue(world):
    _h, op_a, op_b, b = _two_racing_instances(world, queue=True)
    assert not QueuedRequest.objects.filter(instance_id=b).exists()     # admitted now, not queued
    drive(op_a.pk, max_steps=2)
    loser = drive(op_b.pk, max_steps=4)
    assert (loser.status, loser.step) == ("running", "place_and_claim")
    q = QueuedRequest.objects.get(instance_id=b)
    assert q.status == "waiting" and "no free GPU (1 host)" in q.reason
    assert Instance.objects.get(pk=b).status in ("pending", "provisioning")
