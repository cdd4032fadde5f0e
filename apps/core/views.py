"""Operational endpoints: /healthz (liveness), /readyz (dependencies), /metrics (Prometheus)."""
import json
import time

import kombu
import kombu.exceptions
import redis
from django.conf import settings
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpResponse, JsonResponse
from prometheus_client import CONTENT_TYPE_LATEST

from .errors import problem_response
from .metrics import BROKER_UP, CELERY_QUEUE_DEPTH, CELERY_QUEUE_OLDEST_AGE, exposition

CELERY_QUEUES = ("default", "provisioning", "reconcile", "billing")


def _redis_client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1)


def healthz(request):
    """Liveness: the process answers. Never touches a dependency."""
    return JsonResponse({"status": "ok"})


def _check_postgres() -> str | None:
    try:
        connection.ensure_connection()
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        connection.close_if_unusable_or_obsolete()
        return f"postgresql unreachable: {exc.__class__.__name__}"
    if pending:
        return f"{len(pending)} migrations not applied"
    return None


def _check_redis() -> str | None:
    try:
        _redis_client().ping()
    except redis.RedisError as exc:
        return f"redis unreachable: {exc.__class__.__name__}"
    return None


def readyz(request):
    """Readiness: PostgreSQL and Redis reachable and all migrations applied; else 503 problem+json."""
    checks = {"postgresql": _check_postgres(), "redis": _check_redis()}
    failures = {name: [msg] for name, msg in checks.items() if msg}
    if failures:
        return problem_response(request, status=503, code="not_ready", title="Service not ready",
                                detail="; ".join(m[0] for m in failures.values()), errors=failures)
    return JsonResponse({"status": "ready", "checks": {name: "ok" for name in checks}})


def _oldest_message_age(client: redis.Redis, queue: str) -> float:
    """Seconds since the oldest message of a Redis-brokered queue was sent (kombu pushes on the left and pops on
    the right, so the oldest is the last element); 0 when empty or the message has no `sent_at` header."""
    raw = client.lindex(queue, -1)
    if raw is None:
        return 0.0
    try:
        sent_at = float(json.loads(raw)["headers"]["sent_at"])
    except (ValueError, KeyError, TypeError):
        return 0.0
    return max(time.time() - sent_at, 0.0)


def _redis_queue_figures(broker: str) -> None:
    try:
        client = redis.Redis.from_url(broker, socket_connect_timeout=1, socket_timeout=1)
        for queue in CELERY_QUEUES:
            CELERY_QUEUE_DEPTH.labels(queue).set(client.llen(queue))
            CELERY_QUEUE_OLDEST_AGE.labels(queue).set(_oldest_message_age(client, queue))
    except redis.RedisError:
        BROKER_UP.set(0)
    else:
        BROKER_UP.set(1)


def _amqp_queue_depths(broker: str) -> None:
    """Messages ready in each queue of a RabbitMQ broker (a passive declare answers the count without touching
    the queue). The age of the oldest is not readable without taking the message, so that gauge is not set."""
    conn = kombu.Connection(broker, connect_timeout=1, transport_options={"max_retries": 0, "socket_timeout": 1})
    try:
        with conn:
            conn.ensure_connection(max_retries=1)
            channel = conn.channel()
            for queue in CELERY_QUEUES:
                try:
                    CELERY_QUEUE_DEPTH.labels(queue).set(channel.queue_declare(queue, passive=True).message_count)
                except conn.channel_errors:   # not declared yet (no worker ever consumed it): closes the channel
                    CELERY_QUEUE_DEPTH.labels(queue).set(0)
                    channel = conn.channel()
    except (OSError, kombu.exceptions.KombuError, *conn.connection_errors, *conn.channel_errors):
        BROKER_UP.set(0)
    else:
        BROKER_UP.set(1)


def metrics(request):
    """Prometheus text format: this process's request counts and latency histograms; Celery queue depths (Redis
    or RabbitMQ) and the age of each queue's oldest message (Redis); the business metrics the apps' collectors
    compute from the database at scrape time (the same from every process)."""
    broker = settings.CELERY_BROKER_URL
    if broker.startswith(("redis://", "rediss://")):
        _redis_queue_figures(broker)
    elif broker.startswith(("amqp://", "amqps://", "pyamqp://")):
        _amqp_queue_depths(broker)
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
