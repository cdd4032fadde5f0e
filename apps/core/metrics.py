"""Prometheus metrics served at /metrics (text exposition format).

The series below are counted in each process. Under gunicorn with several worker processes, set
`PROMETHEUS_MULTIPROC_DIR` (the web unit and the compose web service do; gunicorn.conf.py empties it at start):
prometheus_client then keeps each process's values in files there and `exposition()` sums them, so every scrape
reports the whole web server whichever worker answers. The business series come from the apps' scrape-time
collectors (`ScrapeTimeCollector`) and are the same from every process either way.
"""
import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

REGISTRY = CollectorRegistry(auto_describe=True)
#: the apps' scrape-time collectors (`register_collector`), served beside the per-process series
_SCRAPE_COLLECTORS: list = []

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
    "gpucloud_celery_queue_depth", "Messages waiting in each Celery queue (Redis list length, or RabbitMQ's "
    "ready count).",
    ["queue"], registry=REGISTRY, multiprocess_mode="mostrecent",
)
BROKER_UP = Gauge(
    "gpucloud_broker_up", "1 when this scrape reached the Celery broker (Redis or RabbitMQ), 0 when it did not "
    "(the queue figures then keep their last values).",
    registry=REGISTRY, multiprocess_mode="mostrecent",
)
TASK_SEND_FAILURES = Counter(
    "gpucloud_task_send_failures_total", "Tasks not sent after commit because the broker was unreachable "
    "(the operations resumer and the periodic reconciles send the work again).", ["task"], registry=REGISTRY,
)
CELERY_QUEUE_OLDEST_AGE = Gauge(
    "gpucloud_celery_queue_oldest_age_seconds", "Age in seconds of the oldest message waiting in each Celery queue "
    "(from the `sent_at` header stamped at publish; 0 when the queue is empty; Redis broker only).",
    ["queue"], registry=REGISTRY, multiprocess_mode="mostrecent",
)


class ScrapeTimeCollector:
    """Base of the collectors that compute business metrics from the database when /metrics is scraped.

    The HTTP counters above live in each process's memory, so with several gunicorn processes each scrape sees
    one process's share. What the database holds is the same whichever process answers: an app's collector
    yields gauges and histograms computed from its rows (one or two grouped queries per scrape), so any web
    process reports the fleet's totals. Subclasses implement `families()`; a database error yields nothing for
    this collector instead of failing the whole scrape.
    """

    def families(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def collect(self):
        from django.db import DatabaseError

        try:
            families = list(self.families())
        except DatabaseError:
            return
        yield from families

    def describe(self):
        return []


def register_collector(collector) -> None:
    """Add an app's collector to REGISTRY once (an app's `ready()` may run twice in one process: tests)."""
    try:
        REGISTRY.unregister(collector)
    except KeyError:
        pass
    REGISTRY.register(collector)
    if collector not in _SCRAPE_COLLECTORS:
        _SCRAPE_COLLECTORS.append(collector)


def exposition() -> bytes:
    """The text /metrics serves: with `PROMETHEUS_MULTIPROC_DIR` set, the per-process series summed over every
    process that wrote them there (prometheus_client's multiprocess mode) plus the scrape-time collectors;
    otherwise this process's REGISTRY."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return generate_latest(REGISTRY)
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    for collector in _SCRAPE_COLLECTORS:
        registry.register(collector)
    return generate_latest(registry)
