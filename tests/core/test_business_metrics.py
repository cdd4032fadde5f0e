"""/metrics reports the business from the database at scrape time: GPUs by model and state, operations by kind
and status with their durations, the queues' depth and age, agents seen in the last minute, invoice runs. Every
figure is exact, and the same whichever process answers (the collectors hold no state of their own)."""
from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest
import redis
from django.conf import settings
from prometheus_client.parser import text_string_to_metric_families

from apps.billing.models import InvoiceRun
from apps.core import clock
from apps.inventory.models import Gpu, Host
from apps.inventory.services import last_seen
from apps.operations.models import Operation
from apps.scheduling.ledger import AllocationSpec, ConsumerRef, allocations_claim
from tests.scheduling import fleet

pytestmark = pytest.mark.django_db


def scrape(client) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted label pairs): value} of one /metrics answer."""
    text = client.get("/metrics").content.decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_gpus_by_model_and_state(client):
    p = fleet.project("m")
    h = fleet.host(gpus=5, model="H100-SXM5-80GB")
    gpus = list(h.gpus.order_by("index"))
    allocations_claim(consumer=ConsumerRef(id=uuid.uuid4(), consumer_type="instance", project_id=p.id),
                      specs=[AllocationSpec(host_id=h.id, resource_class="gpu", gpu_id=gpus[0].id)])
    later = clock.now() + dt.timedelta(days=3)   # a lease starting later does not hold the GPU now
    allocations_claim(consumer=ConsumerRef(id=uuid.uuid4(), consumer_type="lease", project_id=p.id),
                      specs=[AllocationSpec(host_id=h.id, resource_class="gpu", gpu_id=gpus[4].id)],
                      start=later, end=later + dt.timedelta(days=1))
    Gpu.objects.filter(pk=gpus[1].pk).update(scrub_state="dirty")
    Gpu.objects.filter(pk=gpus[2].pk).update(health="degraded", scrub_state="scrub_failed")
    fleet.host(gpus=2, model="A100-SXM4-80GB", state="cordoned")
    fleet.host(gpus=3, model="A100-SXM4-80GB", state="retired")  # not in the fleet any more
    m = scrape(client)
    got = {(dict(k[1])["model"], dict(k[1])["state"]): v for k, v in m.items() if k[0] == "gpucloud_gpus"}
    assert got == {
        ("H100-SXM5-80GB", "allocated"): 1, ("H100-SXM5-80GB", "scrubbing"): 1,
        ("H100-SXM5-80GB", "unhealthy"): 1, ("H100-SXM5-80GB", "free"): 2,
        ("H100-SXM5-80GB", "host_unavailable"): 0,
        ("A100-SXM4-80GB", "host_unavailable"): 2, ("A100-SXM4-80GB", "allocated"): 0,
        ("A100-SXM4-80GB", "unhealthy"): 0, ("A100-SXM4-80GB", "scrubbing"): 0, ("A100-SXM4-80GB", "free"): 0,
    }


def _op(kind: str, status: str, *, age_s: float, took_s: float | None = None, idle_s: float = 0) -> Operation:
    now = clock.now()
    created = now - dt.timedelta(seconds=age_s)
    op = Operation.objects.create(kind=kind, target_type="t", target_id=uuid.uuid4(), status=status)
    Operation.objects.filter(pk=op.pk).update(
        created_at=created, updated_at=now - dt.timedelta(seconds=idle_s),
        finished_at=created + dt.timedelta(seconds=took_s) if took_s is not None else None)
    return op


def test_operations_by_kind_and_status_with_durations(client):
    _op("instance.create", "succeeded", age_s=900, took_s=3)
    _op("instance.create", "succeeded", age_s=900, took_s=40)
    _op("instance.create", "failed", age_s=900, took_s=700)
    _op("instance.create", "running", age_s=100, idle_s=20)
    _op("instance.create", "pending", age_s=100, idle_s=95)
    _op("cluster.create", "running", age_s=50, idle_s=5)
    m = scrape(client)
    ic = ("kind", "instance.create")
    assert m[("gpucloud_operations_in_progress", (ic, ("status", "running")))] == 1
    assert m[("gpucloud_operations_in_progress", (ic, ("status", "pending")))] == 1
    assert m[("gpucloud_operations_in_progress", (("kind", "cluster.create"), ("status", "running")))] == 1
    assert m[("gpucloud_operation_oldest_step_age_seconds", (ic,))] == pytest.approx(95, abs=2)
    assert m[("gpucloud_operation_oldest_step_age_seconds", (("kind", "cluster.create"),))] == pytest.approx(5, abs=2)
    ok = (ic, ("status", "succeeded"))
    assert m[("gpucloud_operation_duration_seconds_count", ok)] == 2
    assert m[("gpucloud_operation_duration_seconds_sum", ok)] == pytest.approx(43)
    buckets = {dict(k[1])["le"]: v for k, v in m.items()
               if k[0] == "gpucloud_operation_duration_seconds_bucket" and dict(k[1])["status"] == "succeeded"}
    assert (buckets["1.0"], buckets["5.0"], buckets["30.0"], buckets["60.0"], buckets["+Inf"]) == (0, 1, 1, 2, 2)
    failed = (ic, ("status", "failed"))
    assert m[("gpucloud_operation_duration_seconds_count", failed)] == 1
    assert m[("gpucloud_operation_duration_seconds_bucket", (ic, ("le", "600.0"), ("status", "failed")))] == 0
    assert m[("gpucloud_operation_duration_seconds_bucket", (ic, ("le", "1800.0"), ("status", "failed")))] == 1
    assert ("gpucloud_operation_duration_seconds_count", (("kind", "cluster.create"), ("status", "running"))) \
        not in m   # unfinished ones are not in the histogram


def test_agents_seen_in_the_last_minute_read_the_batch_and_the_database(client):
    last_seen.redis_client().delete(last_seen.KEY, f"{last_seen.KEY}:flushing")
    now = clock.now()
    hosts = [fleet.host(gpus=0) for _ in range(5)]
    Host.objects.filter(pk=hosts[0].pk).update(last_heartbeat_at=now - dt.timedelta(seconds=30))   # seen
    Host.objects.filter(pk=hosts[1].pk).update(last_heartbeat_at=now - dt.timedelta(seconds=120))  # silent
    assert last_seen.record(credential_id=uuid.uuid4(), host_id=hosts[2].pk, at=now - dt.timedelta(seconds=10))
    assert last_seen.record(credential_id=uuid.uuid4(), host_id=hosts[3].pk, at=now - dt.timedelta(seconds=90))
    # hosts[1] heartbeated 5 s ago, not flushed yet: seen, counted once
    assert last_seen.record(credential_id=uuid.uuid4(), host_id=hosts[1].pk, at=now - dt.timedelta(seconds=5))
    Host.objects.filter(pk=hosts[4].pk).update(state="retired", last_heartbeat_at=now)
    try:
        m = scrape(client)
    finally:
        last_seen.redis_client().delete(last_seen.KEY)
    assert m[("gpucloud_agents_seen_last_minute", ())] == 3
    assert m[("gpucloud_hosts", (("state", "available"),))] == 4
    assert m[("gpucloud_hosts", (("state", "faulty"),))] == 0
    assert ("gpucloud_hosts", (("state", "retired"),)) not in m


def test_invoice_runs_by_status(client):
    done = dt.datetime(2030, 2, 1, 3, 0, tzinfo=dt.UTC)
    InvoiceRun.objects.create(period="2030-01", status="completed", finished_at=done)
    InvoiceRun.objects.create(period="2029-12", status="completed", finished_at=done - dt.timedelta(days=31))
    InvoiceRun.objects.create(period="2030-01", status="failed", finished_at=done - dt.timedelta(hours=1))
    m = scrape(client)
    runs = {dict(k[1])["status"]: v for k, v in m.items() if k[0] == "gpucloud_invoice_runs"}
    assert runs == {"pending": 0, "running": 0, "completed": 2, "failed": 1}
    assert m[("gpucloud_invoice_run_last_finished_timestamp_seconds", (("status", "completed"),))] == \
        done.timestamp()
    assert ("gpucloud_invoice_run_last_finished_timestamp_seconds", (("status", "running"),)) not in m


def test_celery_queue_depth_and_age_of_its_oldest_message(client):
    from apps.operations.tasks import operation_run_step_task
    from gpucloud.celery import app as celery_app

    r = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    r.delete("billing")
    empty = scrape(client)
    assert empty[("gpucloud_celery_queue_depth", (("queue", "billing"),))] == 0
    assert empty[("gpucloud_celery_queue_oldest_age_seconds", (("queue", "billing"),))] == 0
    celery_app.conf.task_always_eager = False   # these sends go to the broker (conftest runs eagerly)
    try:
        operation_run_step_task.apply_async((str(uuid.uuid4()),), queue="billing")
        oldest = json.loads(r.lindex("billing", -1))
        oldest["headers"]["sent_at"] -= 42          # as if sent 42 s ago
        r.lset("billing", -1, json.dumps(oldest))
        operation_run_step_task.apply_async((str(uuid.uuid4()),), queue="billing")
        m = scrape(client)
    finally:
        celery_app.conf.task_always_eager = True
        r.delete("billing")
    assert m[("gpucloud_celery_queue_depth", (("queue", "billing"),))] == 2
    assert m[("gpucloud_broker_up", ())] == 1
    assert m[("gpucloud_celery_queue_oldest_age_seconds", (("queue", "billing"),))] == pytest.approx(42, abs=2)


def test_on_demand_queue_depth_and_age(client):
    from apps.compute.models import Flavor, Image, Instance
    from apps.reservations.models import QueuedRequest

    p = fleet.project("q")
    flavor = Flavor.objects.create(name="m-c2", vcpus=2, memory_mib=2048)
    image = Image.objects.create(name="m-img", os="ubuntu", source_url="https://images.test/u.qcow2",
                                 checksum="sha256:" + "a" * 64)
    m = scrape(client)
    assert m[("gpucloud_ondemand_queue_oldest_age_seconds", ())] == 0
    expires = clock.now() + dt.timedelta(hours=2)
    for i, (status, waited_s, gpus) in enumerate([("waiting", 600, 8), ("waiting", 60, 2), ("placed", 3600, 4)]):
        inst = Instance.objects.create(project=p, name=f"q{i}", flavor=flavor, image=image)
        q = QueuedRequest.objects.create(project=p, organization=p.organization, instance=inst, gpus=gpus,
                                         status=status, expires_at=expires)
        QueuedRequest.objects.filter(pk=q.pk).update(created_at=clock.now() - dt.timedelta(seconds=waited_s))
    m = scrape(client)
    assert m[("gpucloud_ondemand_queue_waiting", (("kind", "instance"),))] == 2
    assert m[("gpucloud_ondemand_queue_waiting", (("kind", "cluster"),))] == 0
    assert m[("gpucloud_ondemand_queue_waiting_gpus", ())] == 10
    assert m[("gpucloud_ondemand_queue_oldest_age_seconds", ())] == pytest.approx(600, abs=2)


def test_celery_queue_depth_with_rabbitmq_as_the_broker(client, settings):
    import kombu

    from tests.operations.brokers import AMQP_URL, rabbitmq_connection

    with rabbitmq_connection() as conn:
        queue = kombu.Queue("billing", channel=conn.default_channel)
        queue.declare()
        conn.default_channel.queue_purge("billing")
        producer = conn.Producer()
        for n in range(3):
            producer.publish({"n": n}, routing_key="billing")
        settings.CELERY_BROKER_URL = AMQP_URL
        try:
            m = scrape(client)
        finally:
            conn.default_channel.queue_purge("billing")
    assert m[("gpucloud_celery_queue_depth", (("queue", "billing"),))] == 3


def test_metrics_answer_at_once_when_the_broker_is_down(client, settings):
    import time

    settings.CELERY_BROKER_URL = "amqp://guest:guest@127.0.0.1:1//"   # nothing listens on port 1
    started = time.monotonic()
    resp = client.get("/metrics")
    assert resp.status_code == 200 and time.monotonic() - started < 5
    assert scrape(client)[("gpucloud_broker_up", ())] == 0     # the outage shows, not only missing samples
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    started = time.monotonic()
    resp = client.get("/metrics")
    assert resp.status_code == 200 and time.monotonic() - started < 5
    assert scrape(client)[("gpucloud_broker_up", ())] == 0
    assert b"gpucloud_gpus" in resp.content or b"# TYPE gpucloud_gpus gauge" in resp.content
