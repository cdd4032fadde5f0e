"""The broker being down after commit is not the client's error. Before, with Redis unreachable, POST /instances
and POST /vpcs answered 500 (after ~19 s with a broker that did not answer) although the rows were committed;
the "failed" instance later ran and was billed. Now the client gets its 202/201 at once, the committed operation
waits for the resumer, a retry with the same Idempotency-Key returns the same operation, and once the broker is
back the resumer sends the operation and it runs. The broker is a closed 127.0.0.1 port, or a local listener
that never answers (no traffic leaves the machine)."""
import socket
import time

import pytest

from apps.compute.models import Instance
from apps.networking.models import Vpc
from apps.operations.models import Operation
from apps.operations.runner import operation_resume_stalled
from gpucloud.celery import app as celery_app

from .conftest import create_body, gpu_host

pytestmark = pytest.mark.django_db(transaction=True)


def _point_broker_at(url: str) -> None:
    celery_app.conf.broker_url = url
    celery_app.conf.broker_write_url = url
    celery_app._pool = None  # the next send connects to `url` (kombu keeps a pool per broker URL)
    celery_app.amqp._producer_pool = None


@pytest.fixture
def broker():
    """`broker.down()` (closed port), `broker.hanging()` (accepts, never answers), `broker.up()` (the test's own
    Redis database again). Tasks are really sent (not run inline) while the broker is replaced."""
    original = celery_app.conf.broker_url
    listener = []

    class Broker:
        def down(self):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()
            celery_app.conf.task_always_eager = False
            _point_broker_at(f"redis://127.0.0.1:{port}/0")

        def hanging(self):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen(16)
            listener.append(s)
            celery_app.conf.task_always_eager = False
            _point_broker_at(f"redis://127.0.0.1:{s.getsockname()[1]}/0")

        def up(self):
            _point_broker_at(original)
            celery_app.conf.task_always_eager = True

    b = Broker()
    yield b
    b.up()
    for s in listener:
        s.close()


def _timed_post(client, path, body, **headers):
    started = time.monotonic()
    response = client.post(path, body, format="json", **headers)
    return response, time.monotonic() - started


@pytest.mark.parametrize("mode", ["down", "hanging"])
def test_instance_create_with_the_broker_unreachable(world, broker, mode):
    gpu_host()
    getattr(broker, mode)()
    key = {"HTTP_IDEMPOTENCY_KEY": "create-vm-1"}
    first, took = _timed_post(world.client_a, "/api/v1/instances/", create_body(world, world.cpu), **key)
    assert first.status_code == 202, first.content
    assert took < 5.0  # bounded: connect 1 s / read 2 s, not ~19 s
    op_id = first.json()["operation"]["id"]
    op = Operation.objects.get(pk=op_id)
    assert op.status == "pending" and op.step == "place_and_claim"
    assert Instance.objects.get(pk=first.json()["instance"]["id"]).status == "pending"

    again, _ = _timed_post(world.client_a, "/api/v1/instances/", create_body(world, world.cpu), **key)
    assert again.status_code == 202
    assert again.json()["operation"]["id"] == op_id
    assert Instance.objects.filter(project=world.project_a).count() == 1

    broker.up()  # the broker is back: the resumer (beat, worker start) sends what was not sent
    assert operation_resume_stalled(older_than_seconds=0) == 1
    op.refresh_from_db()
    assert op.status == "succeeded", (op.step, op.error_code, op.error_detail)
    assert Instance.objects.get(pk=first.json()["instance"]["id"]).status == "active"


def test_vpc_create_with_the_broker_unreachable(world, broker):
    broker.down()
    body = {"project": str(world.project_a.pk), "name": "net", "cidr": "10.20.0.0/16"}
    response, took = _timed_post(world.client_a, "/api/v1/vpcs", body)
    assert response.status_code == 201, response.content
    assert took < 5.0
    assert Vpc.objects.filter(project=world.project_a, name="net").count() == 1
