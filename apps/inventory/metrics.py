"""Prometheus metrics of the fleet's hosts and agents, computed at scrape time (core's `ScrapeTimeCollector`), so
every web process reports the same figures.

- ``gpucloud_hosts{state}``: hosts by condition (enrolling, available, cordoned, draining, maintenance, faulty;
  retired hosts are left out).
- ``gpucloud_agents_seen_last_minute``: hosts not retired whose agent was seen in the last 60 s. A heartbeat's
  time reaches the database only at the next batched flush (`services.last_seen`, up to
  `AGENT_LAST_SEEN_FLUSH_SECONDS` later), so this reads both: the hosts' `last_heartbeat_at` and the times
  still waiting in the Redis batch (without Redis, the database alone). Compare with
  ``sum(gpucloud_hosts{state!="enrolling"})`` to see agents that went silent.
"""
from __future__ import annotations

import datetime as dt

import redis
from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily

from apps.core import clock
from apps.core.metrics import ScrapeTimeCollector

from .models import Host
from .services import last_seen
from .states import HostState

SEEN_WINDOW = dt.timedelta(seconds=60)


def _batched_host_ids_seen_since(cutoff: dt.datetime) -> set[str]:
    """Host ids whose heartbeats since `cutoff` wait in the Redis batch (both hashes: see `last_seen`)."""
    ids: set[str] = set()
    client = last_seen.redis_client()
    try:
        batches = [client.hgetall(last_seen.KEY), client.hgetall(f"{last_seen.KEY}:flushing")]
    except redis.RedisError:
        return ids
    for batch in batches:
        for value in batch.values():
            host_id, ts = value.decode().split()
            if float(ts) >= cutoff.timestamp():
                ids.add(host_id)
    return ids


def agents_seen_count(window: dt.timedelta = SEEN_WINDOW) -> int:
    """Hosts not retired whose agent was seen within `window` of now (database and Redis batch together)."""
    cutoff = clock.now() - window
    live = Host.objects.exclude(state=HostState.RETIRED)
    seen = {str(pk) for pk in live.filter(last_heartbeat_at__gte=cutoff).values_list("pk", flat=True)}
    batched = _batched_host_ids_seen_since(cutoff) - seen
    if batched:
        seen |= {str(pk) for pk in live.filter(pk__in=batched).values_list("pk", flat=True)}
    return len(seen)


class HostCollector(ScrapeTimeCollector):
    def families(self):
        hosts = GaugeMetricFamily("gpucloud_hosts", "Hosts by condition (retired left out).", labels=["state"])
        counts = dict(Host.objects.exclude(state=HostState.RETIRED).order_by().values_list("state")
                      .annotate(n=Count("id")))
        for state in HostState.values:
            if state != HostState.RETIRED:
                hosts.add_metric([state], counts.get(state, 0))
        yield hosts
        yield GaugeMetricFamily("gpucloud_agents_seen_last_minute", "Hosts whose agent was seen in the last 60 s.",
                                value=agents_seen_count())


#: The one collector of this module; `integrations.register` adds it to core's registry once.
COLLECTOR = HostCollector()
