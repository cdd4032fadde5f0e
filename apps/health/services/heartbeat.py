"""The control plane's own signal `heartbeat_lost`: a host whose agent stopped reporting (docs/health.md).

`Host.last_heartbeat_at` is written by the heartbeat (or by the batched last-seen flush, which lags it by up to
`AGENT_LAST_SEEN_FLUSH_SECONDS`, apps/inventory/services/last_seen.py). A host with a live (unrevoked) agent
credential whose last heartbeat is older than `HEALTH_HEARTBEAT_LOST_SECONDS` gets one `heartbeat_lost` event
through `health_event_ingest` (classification row `heartbeat-lost`), keyed by that last heartbeat: running the
detector again adds nothing; a host that comes back and goes silent again gets a new event.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db.models import Exists, OuterRef

from apps.core.clock import now
from apps.inventory.models import AgentCredential, Host
from apps.inventory.states import HostState

from ..models import HealthEvent
from ..states import EventKind, EventSource
from .ingest import health_event_ingest

#: hosts in these states are not expected to heartbeat (or are already out of service)
_NOT_WATCHED = (HostState.ENROLLING, HostState.MAINTENANCE, HostState.RETIRED)


def heartbeat_lost_threshold() -> dt.timedelta:
    """How long an agent may stay silent (`HEALTH_HEARTBEAT_LOST_SECONDS`, default 300 s: twenty 15 s heartbeats
    and the batched last-seen flush's lag)."""
    return dt.timedelta(seconds=getattr(settings, "HEALTH_HEARTBEAT_LOST_SECONDS", 300))


def heartbeat_lost_detect() -> list[HealthEvent]:
    """Record `heartbeat_lost` for every watched host silent beyond the threshold that has no event for this
    silence yet; returns the events created. Idempotent (one event per host and last heartbeat). `observed_at`
    is the instant the silence crossed the threshold."""
    threshold = heartbeat_lost_threshold()
    cutoff = now() - threshold
    already = HealthEvent.objects.filter(
        host=OuterRef("pk"), kind=EventKind.HEARTBEAT_LOST, observed_at__gte=OuterRef("last_heartbeat_at")
    )
    live_agent = AgentCredential.objects.filter(host=OuterRef("pk"), revoked_at__isnull=True)
    hosts = (
        Host.objects.filter(last_heartbeat_at__lt=cutoff)
        .exclude(state__in=_NOT_WATCHED)
        .filter(Exists(live_agent))
        .exclude(Exists(already))
        .order_by("name")
    )
    created = []
    for host in hosts:
        last = host.last_heartbeat_at
        event, new = health_event_ingest(
            actor=None,
            host=host,
            kind=EventKind.HEARTBEAT_LOST,
            observed_at=last + threshold,
            dedup_key=f"heartbeat_lost:{last.isoformat()}",
            message=f"no agent heartbeat since {last.isoformat()} ({int(threshold.total_seconds())} s threshold)",
            source=EventSource.CONTROL_PLANE,
        )
        if new:
            created.append(event)
    return created


__all__ = ["heartbeat_lost_detect", "heartbeat_lost_threshold"]
