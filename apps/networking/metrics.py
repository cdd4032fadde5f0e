"""Prometheus metrics of networking, computed from the database at scrape time (so the web process serving
/metrics reports what the reconcile workers recorded).

- ``gpucloud_ib_partitions_drift_events{fabric}``: partitions-file drift events recorded so far (missing,
  unreadable, invalid or hand-modified file; `FabricDriftEvent`). Alert on any increase:
  ``increase(gpucloud_ib_partitions_drift_events[10m]) > 0``.
- ``gpucloud_ib_partitions_last_drift_timestamp_seconds{fabric}``: when the last one was found.
"""
from __future__ import annotations

from django.db import DatabaseError
from django.db.models import Count, Max
from prometheus_client.core import GaugeMetricFamily


class DriftCollector:
    def collect(self):
        from .models import FabricDriftEvent

        count = GaugeMetricFamily("gpucloud_ib_partitions_drift_events",
                                  "Partitions-file drift events recorded per InfiniBand fabric.", labels=["fabric"])
        last = GaugeMetricFamily("gpucloud_ib_partitions_last_drift_timestamp_seconds",
                                 "Unix time of the last partitions-file drift per InfiniBand fabric.",
                                 labels=["fabric"])
        try:
            rows = list(FabricDriftEvent.objects.values("key").annotate(n=Count("id"), at=Max("created_at")))
        except DatabaseError:
            rows = []
        for r in rows:
            name = r["key"].removeprefix("ib:")
            count.add_metric([name], r["n"])
            last.add_metric([name], r["at"].timestamp())
        yield count
        yield last

    def describe(self):
        return []


#: The one collector of this module; `integrations.register` adds it to core's registry once.
COLLECTOR = DriftCollector()
