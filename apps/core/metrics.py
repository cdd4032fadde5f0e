"""Prometheus metrics served at /metrics (text exposition format)."""
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

HTTP_REQUESTS = Counter(
    "gpucloud_http_requests_total", "HTTP requests by method, route and status.",
    ["method", "route", "status"], registry=REGISTRY,
)
HTTP_LATENCY = Histogram(
    "gpucloud_http_request_duration_seconds", "HTTP request latency in seconds by method and route.",
    ["method", "route"], registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
CELERY_QUEUE_DEPTH = Gauge(
    "gpucloud_celery_queue_depth", "Messages waiting in each Celery queue (Redis list length).",
    ["queue"], registry=REGISTRY,
)
TASK_SEND_FAILURES = Counter(
    "gpucloud_task_send_failures_total", "Tasks not sent after commit because the broker was unreachable "
    "(the operations resumer and the periodic reconciles send the work again).", ["task"], registry=REGISTRY,
)
