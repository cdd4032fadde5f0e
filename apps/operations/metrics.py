"""Prometheus metrics of operations, computed from the database at scrape time (core's `ScrapeTimeCollector`), so
every web process reports the same figures whichever worker ran the steps.

- ``gpucloud_operations_in_progress{kind, status}``: operations not finished (``pending``, ``running``).
- ``gpucloud_operation_oldest_step_age_seconds{kind}``: of the unfinished operations of a kind, the longest time
  since one last committed a step (`updated_at`): how long the oldest piece of work has waited in the queue or
  in a worker. Alert when it passes the longest step you expect (beat's resumer re-sends work untouched for
  30 s every 15 s, so a value that keeps growing means no worker takes it).
- ``gpucloud_operation_duration_seconds{kind, status}``: histogram of finished operations (``succeeded``,
  ``failed``, ``cancelled``) from creation to `finished_at`; ``_count`` is how many finished, so
  ``increase(gpucloud_operation_duration_seconds_count{status="failed"}[1h])`` counts the failures of the
  hour. Computed by one grouped query over the finished operations (a sequential scan, once per scrape).
"""
from __future__ import annotations

from django.db import connection
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily

from apps.core import clock
from apps.core.metrics import ScrapeTimeCollector

from .models import TERMINAL, Operation

#: upper bounds of the duration histogram, seconds
DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600)


def operation_durations() -> list[tuple[str, str, list[int], int, float]]:
    """[(kind, status, cumulative count per DURATION_BUCKETS bound, count, sum of seconds)] of finished ones."""
    buckets = ", ".join("count(*) FILTER (WHERE d <= %s)" for _ in DURATION_BUCKETS)
    sql = (f"SELECT kind, status, count(*), coalesce(sum(d), 0), {buckets} FROM ("
           f" SELECT kind, status, extract(epoch FROM finished_at - created_at)::float8 AS d"
           f" FROM {Operation._meta.db_table} WHERE status = ANY(%s) AND finished_at IS NOT NULL) o"
           f" GROUP BY kind, status ORDER BY kind, status")
    with connection.cursor() as cur:
        cur.execute(sql, [*DURATION_BUCKETS, sorted(TERMINAL)])
        return [(kind, status, list(rest), count, total) for kind, status, count, total, *rest in cur.fetchall()]


def operations_unfinished() -> list[tuple[str, str, int, float]]:
    """[(kind, status, count, seconds since the oldest last committed a step)] of pending and running ones."""
    sql = (f"SELECT kind, status, count(*), extract(epoch FROM %s - min(updated_at))::float8"
           f" FROM {Operation._meta.db_table} WHERE NOT (status = ANY(%s)) GROUP BY kind, status ORDER BY 1, 2")
    with connection.cursor() as cur:
        cur.execute(sql, [clock.now(), sorted(TERMINAL)])
        return cur.fetchall()


class OperationCollector(ScrapeTimeCollector):
    def families(self):
        progress = GaugeMetricFamily("gpucloud_operations_in_progress", "Unfinished operations by kind and "
                                     "status (pending, running).", labels=["kind", "status"])
        oldest = GaugeMetricFamily("gpucloud_operation_oldest_step_age_seconds", "Seconds since the unfinished "
                                   "operation of a kind that waited longest last committed a step.",
                                   labels=["kind"])
        ages: dict[str, float] = {}
        for kind, status, count, age in operations_unfinished():
            progress.add_metric([kind, status], count)
            ages[kind] = max(ages.get(kind, 0.0), max(age, 0.0))
        for kind, age in sorted(ages.items()):
            oldest.add_metric([kind], age)
        duration = HistogramMetricFamily("gpucloud_operation_duration_seconds", "Duration of finished "
                                         "operations, creation to finish, by kind and final status.",
                                         labels=["kind", "status"])
        for kind, status, cumulative, count, total in operation_durations():
            buckets = [(str(float(b)), n) for b, n in zip(DURATION_BUCKETS, cumulative, strict=True)]
            duration.add_metric([kind, status], buckets + [("+Inf", count)], total)
        yield from (progress, oldest, duration)


#: The one collector of this module; `apps.OperationsConfig.ready` adds it to core's registry once.
COLLECTOR = OperationCollector()
