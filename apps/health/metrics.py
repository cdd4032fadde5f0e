"""Prometheus metrics of fleet health, computed from the database at scrape time (core's `ScrapeTimeCollector`), so
every web process reports the same figures (docs/health.md, "Visibility"). Hosts by condition are inventory's
``gpucloud_hosts{state}``.

- ``gpucloud_health_events_total{class}``: health events recorded, by classification (rows are never deleted, so
  the count only grows: a counter);
- ``gpucloud_health_gpus{condition}``: GPUs not retired by condition: ``faulty`` (out of placement),
  ``in_repair`` (an open repair), ``rma`` (an open RMA record);
- ``gpucloud_health_repairs{status}``: repairs and acceptances by status (open ones and how the others ended);
- ``gpucloud_health_time_to_drain_seconds``: per VM moved off a failed device, from the event's record to the end
  of its re-create (the checkpoint notice included): a histogram;
- ``gpucloud_health_time_to_recover_seconds``: per repair that passed, from the event's record to the device back
  in service: a histogram.
"""

from __future__ import annotations

from django.db import connection
from django.db.models import Count
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from apps.core.metrics import ScrapeTimeCollector

from .states import OPEN_REPAIR, RemediationStatus, RepairStatus

#: seconds: 1 min .. 1 day (a drain includes the checkpoint notice, 15 min by default)
BUCKETS = (60.0, 300.0, 900.0, 1800.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 86400.0)

_DURATIONS = """
SELECT {buckets}, count(*), coalesce(sum(d), 0)
FROM (SELECT extract(epoch FROM (t.finished_at - e.created_at)) AS d
      FROM {table} t JOIN health_healthevent e ON e.id = t.event_id
      WHERE t.status = %s AND t.finished_at IS NOT NULL) x
"""


def _histogram(name: str, doc: str, table: str, status: str) -> HistogramMetricFamily:
    sql = _DURATIONS.format(buckets=", ".join(f"count(*) FILTER (WHERE d <= {b})" for b in BUCKETS), table=table)
    with connection.cursor() as cur:
        cur.execute(sql, [status])
        row = cur.fetchone()
    counts, total, total_sum = row[:len(BUCKETS)], row[len(BUCKETS)], float(row[len(BUCKETS) + 1])
    buckets = [(str(b), n) for b, n in zip(BUCKETS, counts, strict=True)] + [("+Inf", total)]
    hist = HistogramMetricFamily(name, doc)
    hist.add_metric([], buckets, total_sum)
    return hist


class HealthCollector(ScrapeTimeCollector):
    def families(self):
        from apps.inventory.models import Gpu
        from apps.inventory.states import GpuHealth, HostState

        from .models import HealthEvent, Repair, Rma

        events = CounterMetricFamily("gpucloud_health_events", "Health events recorded, by classification.",
                                     labels=["class"])
        for klass, n in HealthEvent.objects.order_by().values_list("classification").annotate(n=Count("id")):
            events.add_metric([klass or "unclassified"], n)
        yield events
        gpus = GaugeMetricFamily("gpucloud_health_gpus", "GPUs (hosts not retired) that are faulty, in repair or "
                                 "under an open RMA.", labels=["condition"])
        live = Gpu.objects.exclude(host__state=HostState.RETIRED)
        gpus.add_metric(["faulty"], live.filter(health=GpuHealth.FAULTY).count())
        gpus.add_metric(["in_repair"], Repair.objects.filter(status__in=OPEN_REPAIR, gpu__isnull=False)
                        .values("gpu_id").distinct().count())
        gpus.add_metric(["rma"], Rma.objects.filter(closed_at__isnull=True, gpu__isnull=False).count())
        yield gpus
        repairs = GaugeMetricFamily("gpucloud_health_repairs", "Repairs and acceptances by status.",
                                    labels=["status"])
        counts = dict(Repair.objects.order_by().values_list("status").annotate(n=Count("id")))
        for status in RepairStatus.values:
            repairs.add_metric([status], counts.get(status, 0))
        yield repairs
        yield _histogram("gpucloud_health_time_to_drain_seconds",
                         "Seconds from a health event's record to its VM re-created off the failed device.",
                         "health_remediation", RemediationStatus.SUCCEEDED)
        yield _histogram("gpucloud_health_time_to_recover_seconds",
                         "Seconds from a health event's record to the device back in service (repair passed).",
                         "health_repair", RepairStatus.PASSED)


#: The one collector of this module; the app's `ready()` adds it to core's registry once.
COLLECTOR = HealthCollector()
