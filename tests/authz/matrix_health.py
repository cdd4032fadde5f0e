"""Authorization-matrix entries of the health app: the agent's event report (agent credential only), the staff
classification table and preview, and the tenant's event list (scoped to the caller's projects)."""

from apps.health.models import HealthEvent, HealthEventImpact
from apps.inventory.models import Host

from .framework import Case, Entry, expect
from .matrix_inventory import AGENT_ONLY, STAFF_READ, STAFF_WRITE, make_host


def _impact(world) -> Case:
    """An event that touched a resource of organization A (other_org must not see it in the list)."""
    host = make_host("authz-h1", gpus=1)
    event = HealthEvent.objects.create(
        host=host,
        gpu=host.gpus.first(),
        kind="xid",
        xid=79,
        observed_at=host.created_at,
        dedup_key="authz",
        classification="gpu_lost",
    )
    HealthEventImpact.objects.create(
        event=event,
        project=world.project_a,
        resource_type="instance",
        resource_id="0190aaaa-0000-7000-8000-00000000000a",
    )
    return Case()


def _preview(world) -> Case:
    host = Host.objects.filter(name="authz-h1").first() or make_host("authz-h1", gpus=1)
    return Case(data={"host": str(host.pk), "kind": "xid", "xid": 79, "gpu_index": 0})


ENTRIES = [
    Entry("GET", "/api/v1/health-events", expect(other_org=200), _impact),
    Entry("GET", "/api/v1/health/classification", STAFF_READ),
    # a staff write-role check on a read-only calculation: no durable change, so no audit event
    Entry("POST", "/api/v1/health/preview", STAFF_WRITE(), _preview, audited=False),
    Entry("POST", "/api/v1/agent/health-events", AGENT_ONLY, lambda w: Case(data={"kind": "thermal"})),
]
