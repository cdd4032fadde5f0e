"""The same Celery code runs on RabbitMQ when CELERY_BROKER_URL says so: an operation is sent to a real RabbitMQ,
a real worker consumes it there and runs all its steps (each next step is sent through RabbitMQ again)."""

import os
import signal
import uuid

import kombu
import pytest
from django.conf import settings

from apps.operations.models import Operation
from apps.operations.tasks import operation_run_step_task
from gpucloud.celery import app as celery_app

from . import killable  # noqa: F401  (registers the workflow in this process too)
from .brokers import AMQP_URL, rabbitmq_connection
from .test_worker_kill import _start_worker, _wait, _worker_env


def _provisioning_depth(conn: kombu.Connection) -> int:
    return conn.default_channel.queue_declare("provisioning", passive=True).message_count


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_operation_runs_with_rabbitmq_as_the_broker(tmp_path):
    with rabbitmq_connection() as conn:
        kombu.Queue("provisioning", channel=conn.default_channel).declare()
        conn.default_channel.queue_purge("provisioning")

        op = Operation.objects.create(
            kind="test.killable", target_type="test.thing", target_id=uuid.uuid4(), step="one"
        )
        (tmp_path / "go").touch()  # step two does not wait
        celery_app.conf.task_always_eager = False  # this one send goes to the broker (conftest runs eagerly)
        try:
            operation_run_step_task.apply_async((str(op.id),), queue="provisioning", connection=conn)
        finally:
            celery_app.conf.task_always_eager = True
        _wait(lambda: _provisioning_depth(conn) == 1, 10, "the message in RabbitMQ")

        env = _worker_env(tmp_path)
        env["CELERY_BROKER_URL"] = AMQP_URL
        worker = _start_worker(env, tmp_path, "rabbit")
        try:
            _wait(lambda: Operation.objects.get(id=op.id).status == "succeeded", 90, "operation to succeed")
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(15)
        op.refresh_from_db()
        assert op.steps_done == ["one", "two", "three"]
        assert op.state == {"one": True, "two": True, "three": True}
        assert "amqp://guest:**@127.0.0.1:5672//" in (tmp_path / "rabbit.log").read_text()
        assert settings.CELERY_BROKER_URL.startswith("redis://")  # this process's default stays Redis
        assert celery_app.conf.broker_url.startswith("redis://")
