"""Authorization-matrix entries of the audit app (`/audit-events`)."""
from apps.audit.services import audit_record

from .framework import Case, Entry, expect


def _event(world) -> Case:
    event = audit_record(actor=world.users["owner"], action="project.update", target=world.project_a)
    return Case(kwargs={"pk": event.pk})


ENTRIES = [
    Entry("GET", "/api/v1/audit-events", expect(other_org=200)),
    Entry("GET", "/api/v1/audit-events/{pk}", expect(), _event),
]
