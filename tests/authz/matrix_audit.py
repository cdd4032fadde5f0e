"""Authorization-matrix entries of the audit app (`/audit-events`)."""
from apps.audit.services import audit_record

from .framework import Case, Entry, expect


def _event(world) -> Case:
    event = audit_record(actor=world.users["owner"], action="project.update", target=world.project_a)
    return Case(kwargs={"pk": event.pk})


STAFF_READ = expect(other_org=404, viewer=404, member=404, admin=404, read_token=404, staff=200)

ENTRIES = [
    Entry("GET", "/api/v1/audit-events", expect(other_org=200)),
    Entry("GET", "/api/v1/audit-events/{pk}", expect(), _event),
    # the SIEM export and the chain verification cover every organization: staff only
    Entry("GET", "/api/v1/audit-events/export", STAFF_READ),
    Entry("GET", "/api/v1/audit-events/verify", STAFF_READ),
]
