"""The brokers the operation tests run their real workers against: Redis (the default) and RabbitMQ (the
production choice, `CELERY_BROKER_URL=amqp://...`; docs/deployment.md). RabbitMQ is at `RABBITMQ_URL`
(default amqp://guest:guest@127.0.0.1:5672//); where it does not answer its variants are skipped, unless
`GPUCLOUD_TEST_RABBITMQ=required` (CI sets it: .ci/run), where they fail."""
from __future__ import annotations

import os

import kombu
import pytest
import redis

AMQP_URL = os.environ.get("RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//")
#: the Redis database the workers of these tests use as their broker (not the one of the cache)
BROKER_DB = 14
QUEUES = ("default", "provisioning", "reconcile", "billing", "notifications")


def rabbitmq_connection() -> kombu.Connection:
    """An open connection to RabbitMQ, or skip (fail where RabbitMQ is required)."""
    conn = kombu.Connection(AMQP_URL, connect_timeout=5)
    try:
        conn.ensure_connection(max_retries=1)
    except Exception as exc:  # noqa: BLE001 - any connection failure
        conn.release()
        message = f"no RabbitMQ at {AMQP_URL}: {exc}"
        if os.environ.get("GPUCLOUD_TEST_RABBITMQ") == "required":
            pytest.fail(message)
        pytest.skip(message)
    return conn


def empty_broker(kind: str) -> str:
    """Empty the queues of broker `kind` ("redis" or "rabbitmq") and return its URL for the workers."""
    if kind == "redis":
        redis.Redis(port=6379, db=BROKER_DB).flushdb()
        return f"redis://127.0.0.1:6379/{BROKER_DB}"
    with rabbitmq_connection() as conn:
        for name in QUEUES:
            kombu.Queue(name, channel=conn.default_channel).declare()
            conn.default_channel.queue_purge(name)
    return AMQP_URL
