"""Tenant notifications of health events and incidents through the reservations outbox (`event_record`: audit +
the organization's webhooks subscribed to the event + its billing e-mail), one per organization whose resources
the event touched (`HealthEventImpact`). Payloads name the tenant's own resources, never hosts or serials:

- ``health.event``: ``{event, kind, xid, class, provider_at_fault, observed_at, resources: [{type, id, project}]}``;
- ``health.incident.opened`` / ``health.incident.closed``: ``{incident, event, class, provider_at_fault, start,
  end, resources}`` (closed: the device passed its return-to-service check; the SLA downtime ends at ``end``).
"""

from __future__ import annotations

from collections import defaultdict

from apps.reservations.services.notify import event_record
from apps.reservations.states import Event
from apps.tenancy.models import Project

from ..models import HealthEvent


def _by_organization(event: HealthEvent) -> dict:
    rows = defaultdict(list)
    impacts = list(event.impacts.values_list("project_id", "resource_type", "resource_id"))
    projects = {p.pk: p for p in Project.objects.filter(pk__in={i[0] for i in impacts})
                .select_related("organization")}
    for project_id, rtype, rid in impacts:
        project = projects[project_id]
        rows[project.organization].append((project, {"type": rtype, "id": str(rid), "project": str(project_id)}))
    return rows


def _send(event: HealthEvent, action: str, what: str, body: dict) -> int:
    sent = 0
    for org, items in _by_organization(event).items():
        payload = {**body, "resources": [r for _, r in items]}
        event_record(actor=None, action=action, target=event, organization=org, project=items[0][0],
                     after=payload, event=what, payload=payload)
        sent += 1
    return sent


def health_event_notify(event: HealthEvent) -> int:
    """``health.event`` to every organization the event touched. Returns how many were told."""
    return _send(event, "health.event.notify", Event.HEALTH_EVENT, {
        "event": str(event.pk), "kind": event.kind, "xid": event.xid, "class": event.classification,
        "provider_at_fault": "provider_at_fault" in (event.effects or []),
        "observed_at": event.observed_at.isoformat()})


def incident_notify(event: HealthEvent, incident, *, closed: bool) -> int:
    """``health.incident.opened`` / ``.closed`` of `incident` (inventory's Incident the event opened) to every
    organization the event touched."""
    what = Event.HEALTH_INCIDENT_CLOSED if closed else Event.HEALTH_INCIDENT_OPENED
    return _send(event, f"health.incident.{'close' if closed else 'open'}.notify", what, {
        "incident": str(incident.pk), "event": str(event.pk), "class": event.classification,
        "provider_at_fault": incident.provider_at_fault, "start": incident.start.isoformat(),
        "end": incident.end.isoformat() if incident.end else None})
