"""Operational endpoints: /healthz (liveness), /readyz (dependencies), /metrics (Prometheus)."""
import redis
from django.conf import settings
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpResponse, JsonResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .errors import problem_response
from .metrics import CELERY_QUEUE_DEPTH, REGISTRY

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


def metrics(request):
    """Prometheus text format: request counts, latency histograms, Celery queue depths."""
    try:
        client = _redis_client()
        for queue in CELERY_QUEUES:
            CELERY_QUEUE_DEPTH.labels(queue).set(client.llen(queue))
    except redis.RedisError:
        pass
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
