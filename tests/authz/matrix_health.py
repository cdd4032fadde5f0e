"""Authorization-matrix entries of the health app: the agent's event report (agent credential only), the staff
classification table and preview, the tenant's event list (scoped to the caller's projects), remediations (list,
read, approve) and the project's remediation policy."""

from apps.health.models import HealthEvent, HealthEventImpact, Remediation
from apps.inventory.models import Host

from .framework import Case, Entry, expect, mutation
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


def _remediation(world) -> Case:
    """A proposed remediation of organization A (its instance id names no instance: an approval cancels it)."""
    host = Host.objects.filter(name="authz-h1").first() or make_host("authz-h1", gpus=1)
    event = HealthEvent.objects.create(
        host=host,
        gpu=host.gpus.first(),
        kind="xid",
        xid=79,
        observed_at=host.created_at,
        dedup_key=f"authz-rem-{world.project_a.pk}",
        classification="gpu_lost",
    )
    rem = Remediation.objects.create(
        project=world.project_a,
        event=event,
        resource_id="0190aaaa-0000-7000-8000-00000000000b",
        from_host=host,
        consent_mode="propose",
        status="proposed",
    )
    return Case(kwargs={"pk": str(rem.pk)})


def _policy(world) -> Case:
    return Case(kwargs={"project_id": str(world.project_a.pk)}, data={"consent_mode": "propose"})


ENTRIES = [
    Entry("GET", "/api/v1/remediations", expect(other_org=200), _remediation),
    Entry("GET", "/api/v1/remediations/{pk}", expect(), _remediation),
    Entry("POST", "/api/v1/remediations/{pk}/approve", mutation(member=200, staff=403), _remediation),
    Entry("GET", "/api/v1/projects/{project_id}/remediation-policy", expect(), _policy),
    Entry("PUT", "/api/v1/projects/{project_id}/remediation-policy", mutation(staff=403), _policy),
    Entry("GET", "/api/v1/health-events", expect(other_org=200), _impact),
    Entry("GET", "/api/v1/health/classification", STAFF_READ),
    Entry("GET", "/api/v1/health/hosts/{host_id}/workloads", STAFF_READ,
          lambda w: Case(kwargs={"host_id": str(make_host("authz-h3", gpus=1).pk)})),
    # a staff write-role check on a read-only calculation: no durable change, so no audit event
    Entry("POST", "/api/v1/health/preview", STAFF_WRITE(), _preview, audited=False),
    Entry("POST", "/api/v1/agent/health-events", AGENT_ONLY, lambda w: Case(data={"kind": "thermal"})),
]


def _breaker(world) -> Case:
    from apps.health.models import ComponentIncident
    from apps.inventory.models import Fabric, Region, Switch

    region = Region.objects.get_or_create(name="r1")[0]
    fabric = Fabric.objects.get_or_create(name="authz-ib", defaults={"kind": "infiniband", "region": region})[0]
    leaf = Switch.objects.get_or_create(name="authz-leaf", defaults={"fabric": fabric, "role": "leaf"})[0]
    row = ComponentIncident.objects.filter(switch=leaf, released_at__isnull=True).first()
    row = row or ComponentIncident.objects.create(
        switch=leaf, opened_at=leaf.created_at, hosts_under=12, allowed=3, reason="authz"
    )
    return Case(kwargs={"pk": str(row.pk)})


def _event(world) -> Case:
    """One health event of the fleet (staff read every one; tenants, even the one whose resource it touched, 404)."""
    if not HealthEvent.objects.filter(dedup_key="authz").exists():
        _impact(world)
    return Case(kwargs={"pk": str(HealthEvent.objects.get(dedup_key="authz").pk)})


ENTRIES += [
    Entry("GET", "/api/v1/health/events", STAFF_READ, _event),
    Entry("GET", "/api/v1/health/events/{pk}", STAFF_READ, _event),
    Entry("GET", "/api/v1/health/breakers", STAFF_READ, _breaker),
    Entry("GET", "/api/v1/health/breakers/{pk}", STAFF_READ, _breaker),
    Entry("POST", "/api/v1/health/breakers/{pk}/release", STAFF_WRITE(), _breaker),
]


def _repair(world) -> Case:
    from apps.health.models import Repair

    host = Host.objects.filter(name="authz-h1").first() or make_host("authz-h1", gpus=1)
    row = Repair.objects.filter(host=host).first() or Repair.objects.create(
        host=host, gpu=host.gpus.first(), action="reset_gpu", status="waiting"
    )
    return Case(kwargs={"pk": str(row.pk)})


def _rma(world) -> Case:
    from apps.health.models import Rma

    host = Host.objects.filter(name="authz-h1").first() or make_host("authz-h1", gpus=1)
    gpu = host.gpus.first()
    row = Rma.objects.filter(host=host).first() or Rma.objects.create(
        host=host, gpu=gpu, part="gpu", serial=gpu.serial, reason="authz", opened_at=host.created_at
    )
    return Case(kwargs={"pk": str(row.pk)})


def _rma_close(world) -> Case:
    case = _rma(world)
    return Case(kwargs=case.kwargs, data={"outcome": "replaced"})


ENTRIES += [
    Entry("GET", "/api/v1/health/repairs", STAFF_READ, _repair),
    Entry("GET", "/api/v1/health/repairs/{pk}", STAFF_READ, _repair),
    Entry("GET", "/api/v1/health/rmas", STAFF_READ, _rma),
    Entry("GET", "/api/v1/health/rmas/{pk}", STAFF_READ, _rma),
    Entry("POST", "/api/v1/health/rmas/{pk}/ship", STAFF_WRITE(), _rma),
    Entry("POST", "/api/v1/health/rmas/{pk}/close", STAFF_WRITE(), _rma_close),
]


def _fence(world) -> Case:
    """A fence that failed (the host's BMC never read back off): staff read it and confirm it by hand with a
    reason; each confirm gets a fence not confirmed yet."""
    from apps.health.models import HostFence

    host = Host.objects.filter(name="authz-h2").first() or make_host("authz-h2", gpus=1)
    row = HostFence.objects.filter(host=host, status="failed").first()
    if row is None:
        _event(world)
        event = HealthEvent.objects.get(dedup_key="authz")
        row = HostFence.objects.create(host=host, event=event, status="failed", reason="authz: no BMC")
    return Case(kwargs={"pk": str(row.pk)}, data={"reason": "checked at the rack: the host is off"})


ENTRIES += [
    Entry("GET", "/api/v1/health/fences", STAFF_READ, _fence),
    Entry("GET", "/api/v1/health/fences/{pk}", STAFF_READ, _fence),
    Entry("POST", "/api/v1/health/fences/{pk}/confirm", STAFF_WRITE(), _fence),
]
