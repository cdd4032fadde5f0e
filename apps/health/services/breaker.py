"""The blast-radius breaker (docs/health.md, "The breaker"; ADR 0211).

A switch (or cable, or PSU feed) fault makes many hosts report at once. Taking each of them out would drain a
leaf's worth of capacity for one faulty part. So before ingest takes a host out (cordon, drain, mark faulty) or
moves its VMs, `breaker_check` asks, per leaf switch the event concerns (the event's HCA port's leaf, else every
leaf the host is cabled to), how many other hosts under that leaf were taken out by health events within
`HEALTH_BREAKER_WINDOW_SECONDS` (since the last release): when this host would make it more than
`allowed = max(HEALTH_BREAKER_MIN_HOSTS, floor(HEALTH_BREAKER_MAX_SHARE × hosts under the leaf))`, the breaker
opens: one `ComponentIncident` names the switch, and this and every later event under it keeps its GPU-level
containment but takes no host out and moves no VM until staff release it. The switch row is locked for the
count, so concurrent reports from hosts under one leaf are counted one at a time.
"""

from __future__ import annotations

import datetime as dt
import math

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.errors import InvalidState
from apps.inventory.models import HcaPort, Host, Switch

from ..models import ComponentIncident, HealthEvent


def _conf() -> tuple[dt.timedelta, float, int]:
    return (
        dt.timedelta(seconds=getattr(settings, "HEALTH_BREAKER_WINDOW_SECONDS", 900)),
        float(getattr(settings, "HEALTH_BREAKER_MAX_SHARE", 0.25)),
        int(getattr(settings, "HEALTH_BREAKER_MIN_HOSTS", 1)),
    )


def _leaves(host: Host, hca_port: HcaPort | None) -> list[Switch]:
    if hca_port is not None:
        ids = [hca_port.leaf_switch_id] if hca_port.leaf_switch_id else []
    else:
        ids = list(
            HcaPort.objects.filter(host=host, leaf_switch__isnull=False)
            .values_list("leaf_switch_id", flat=True)
            .distinct()
        )
    return list(Switch.objects.select_for_update().filter(pk__in=ids).order_by("pk"))


def breaker_check(*, host: Host, hca_port: HcaPort | None) -> ComponentIncident | None:
    """The open breaker that holds this host's take-out (opening one when this host crosses the allowance), or
    None when the host may be taken out. Call in the ingest's transaction, before the effects."""
    window, share, minimum = _conf()
    at = now()
    for leaf in _leaves(host, hca_port):
        open_one = ComponentIncident.objects.filter(switch=leaf, released_at__isnull=True).first()
        if open_one is not None:
            _hold(open_one, host)
            return open_one
        under = list(HcaPort.objects.filter(leaf_switch=leaf).values_list("host_id", flat=True).distinct())
        allowed = max(minimum, math.floor(share * len(under)))
        since = at - window
        released = ComponentIncident.objects.filter(switch=leaf).aggregate(m=Max("released_at"))["m"]
        if released and released > since:
            since = released
        taken = set(
            HealthEvent.objects.filter(host_id__in=under, created_at__gt=since, applied__takes_host_out=True)
            .exclude(host=host)
            .values_list("host__name", flat=True)
        )
        if len(taken) + 1 > allowed:
            incident = ComponentIncident.objects.create(
                switch=leaf,
                opened_at=at,
                hosts=sorted(taken),
                hosts_under=len(under),
                allowed=allowed,
                reason=(
                    f"{len(taken) + 1} hosts under {leaf.name} failed within {int(window.total_seconds())} s "
                    f"(allowed {allowed} of {len(under)})"
                ),
            )
            audit_record(
                actor=None,
                action="health.breaker.open",
                target=incident,
                after={
                    "switch": leaf.name,
                    "hosts": incident.hosts,
                    "allowed": allowed,
                    "hosts_under": len(under),
                },
            )
            _hold(incident, host)
            return incident
    return None


def _hold(incident: ComponentIncident, host: Host) -> None:
    hosts = incident.hosts if host.name in incident.hosts else sorted([*incident.hosts, host.name])
    ComponentIncident.objects.filter(pk=incident.pk).update(
        hosts=hosts, events_held=incident.events_held + 1, updated_at=now()
    )
    incident.hosts, incident.events_held = hosts, incident.events_held + 1


def breaker_release(*, actor, incident: ComponentIncident) -> ComponentIncident:
    """Staff close the component incident: automatic take-outs under the switch resume for new events (the
    hosts whose events it held are not taken out after the fact). 409 `invalid_state` when already released."""
    with transaction.atomic():
        row = ComponentIncident.objects.select_for_update().select_related("switch").get(pk=incident.pk)
        if row.released_at is not None:
            raise InvalidState(
                "The breaker is released already.", current_state="released", allowed_states=["open"]
            )
        row.released_at, row.released_by = now(), actor
        row.save(update_fields=["released_at", "released_by", "updated_at"])
        audit_record(
            actor=actor, action="health.breaker.release", target=row, after={"switch": row.switch.name}
        )
    return row


__all__ = ["breaker_check", "breaker_release"]
