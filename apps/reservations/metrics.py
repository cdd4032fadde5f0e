"""Prometheus metrics of the on-demand queue, computed from the database at scrape time (core's
`ScrapeTimeCollector`), so every web process reports the same figures.

- ``gpucloud_ondemand_queue_waiting{kind}``: entries waiting for capacity (``kind`` = ``instance`` or
  ``cluster``; a cluster is one all-or-nothing entry).
- ``gpucloud_ondemand_queue_waiting_gpus``: whole-GPU equivalents the waiting entries ask for.
- ``gpucloud_ondemand_queue_oldest_age_seconds``: how long the oldest waiting entry has waited (0 when none).
"""
from __future__ import annotations

from django.db.models import Count, Min, Q, Sum
from prometheus_client.core import GaugeMetricFamily

from apps.core import clock
from apps.core.metrics import ScrapeTimeCollector

from .models import QueuedRequest
from .states import QueueStatus


class QueueCollector(ScrapeTimeCollector):
    def families(self):
        row = QueuedRequest.objects.filter(status=QueueStatus.WAITING).aggregate(
            instances=Count("id", filter=Q(instance__isnull=False)),
            clusters=Count("id", filter=Q(cluster__isnull=False)),
            gpus=Sum("gpus"), oldest=Min("created_at"))
        waiting = GaugeMetricFamily("gpucloud_ondemand_queue_waiting", "On-demand queue entries waiting for "
                                    "capacity, by kind (instance, cluster).", labels=["kind"])
        waiting.add_metric(["instance"], row["instances"])
        waiting.add_metric(["cluster"], row["clusters"])
        yield waiting
        yield GaugeMetricFamily("gpucloud_ondemand_queue_waiting_gpus", "Whole-GPU equivalents the waiting "
                                "entries ask for.", value=row["gpus"] or 0)
        age = (clock.now() - row["oldest"]).total_seconds() if row["oldest"] else 0.0
        yield GaugeMetricFamily("gpucloud_ondemand_queue_oldest_age_seconds", "Seconds the oldest waiting entry "
                                "has waited (0 when none).", value=max(age, 0.0))


#: The one collector of this module; `integrations.register` adds it to core's registry once.
COLLECTOR = QueueCollector()
