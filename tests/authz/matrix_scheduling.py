"""Authorization-matrix entries of the scheduling app: the staff placement dry run, the ledger read API and the
fleet heat map."""
import uuid

from apps.scheduling.ledger import AllocationSpec, ConsumerRef, allocations_claim
from tests.inventory.helpers import make_host

from .framework import Case, Entry, expect

# the fleet heat map: tenants (any role, read tokens) get 404, as for an object they may not see
STAFF_ONLY_HIDDEN = expect(other_org=404, viewer=404, member=404, admin=404, read_token=404, staff=200)
STAFF_ONLY = expect(other_org=404, viewer=404, member=404, admin=404, read_token=404, staff=200)


def _dry_run(world) -> Case:
    from apps.inventory.models import Host

    Host.objects.filter(name="authz-sched-h1").exists() or make_host("authz-sched-h1", gpus=1)
    return Case(data={"project": str(world.project_a.pk), "gpus_per_host": 1})


def _allocation(world) -> Case:
    host = make_host("authz-sched-h1", gpus=1)
    rows = allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", world.project_a.pk),
                             specs=[AllocationSpec(host.id, "gpu", gpu_id=host.gpus.get().id)])
    return Case(kwargs={"pk": rows[0].pk})


ENTRIES = [
    Entry("POST", "/api/v1/placement/candidates", STAFF_ONLY, _dry_run, audited=False),
    Entry("GET", "/api/v1/allocations", STAFF_ONLY),
    Entry("GET", "/api/v1/allocations/{pk}", STAFF_ONLY, _allocation),
    Entry("GET", "/api/v1/fleet/summary", STAFF_ONLY_HIDDEN, _dry_run, audited=False),
]
