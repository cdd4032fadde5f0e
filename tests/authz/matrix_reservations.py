"""Authorization-matrix entries of the reservations app: leases (with cancel/extend/shrink), the capacity
calendar, instance requests, queued requests, an instance's capacity terms and webhook endpoints. Tenants write
leases and instance requests as project members or admins; webhooks are managed by organization owners/admins."""
import datetime as dt

from apps.compute.models import Flavor, Image, Instance
from apps.reservations.models import InstanceTerms, Lease, OnDemandReserve, QueuedRequest, WebhookEndpoint
from apps.reservations.services.leases import lease_create
from tests.inventory.helpers import make_host

from .framework import Case, Entry, expect

LIST = expect(other_org=200)
WRITE = expect(other_org=404, viewer=403, member=200, admin=200, read_token=403, staff=403)
ORG_ADMIN_DELETE = expect(other_org=404, viewer=403, member=403, admin=204, read_token=403, staff=403)
# a body naming organization A's project or organization is "Not found." (400) for another tenant (ADR 0010)
BODY_CREATE = expect(other_org=400, viewer=403, member=201, admin=201, read_token=403, staff=403)
BODY_ACCEPTED = expect(other_org=400, viewer=403, member=202, admin=202, read_token=403, staff=403)
ORG_ADMIN_BODY_CREATE = expect(other_org=400, viewer=403, member=403, admin=201, read_token=403, staff=403)
STAFF_READ = expect(other_org=404, viewer=404, member=404, admin=404, read_token=404, staff=200)
STAFF_CREATE = expect(other_org=404, viewer=404, member=404, admin=404, read_token=404, staff=201)
STAFF_DELETE = expect(other_org=404, viewer=404, member=404, admin=404, read_token=404, staff=204)
START, END = "2099-01-01 09:00", "2099-01-01 12:00"


def _host():
    from apps.inventory.models import Host

    return Host.objects.filter(name="authz-resv-h1").first() or make_host("authz-resv-h1", gpus=1)


def _lease(world) -> Lease:
    """A's lease (the one a setup made before in this transaction, when the walk runs every setup at once: a
    second one would pass the organization's lease quota)."""
    _host()
    made = Lease.objects.filter(project=world.project_a, name="authz-lease").first()
    return made or lease_create(actor=None, project=world.project_a, name="authz-lease", start=START, end=END, kind="gpus",
                        gpu_model="H100-SXM5-80GB", count=1)


def _lease_body(world) -> Case:
    _host()
    return Case(data={"project": str(world.project_a.pk), "name": "l", "start": START, "end": END, "kind": "gpus",
                      "gpu_model": "H100-SXM5-80GB", "count": 1})


def _lease_case(data=None):
    return lambda w: Case(kwargs={"pk": _lease(w).pk}, data=data)


def _instance(world) -> Instance:
    flavor = Flavor.objects.get_or_create(name="authz-resv-c2", defaults={"vcpus": 2, "memory_mib": 2048})[0]
    image = Image.objects.get_or_create(name="authz-resv-img", defaults={
        "os": "ubuntu", "source_url": "https://images.test/u.qcow2", "checksum": "sha256:" + "a" * 64})[0]
    inst = Instance.objects.create(project=world.project_a, name="vm", flavor=flavor, image=image)
    InstanceTerms.objects.create(instance=inst, project=world.project_a)
    return inst


def _queued(world) -> QueuedRequest:
    inst = _instance(world)
    return QueuedRequest.objects.create(project=world.project_a, organization=world.org_a, instance=inst,
                                        expires_at=dt.datetime(2099, 1, 1, tzinfo=dt.UTC))


def _instance_request(world) -> Case:
    from tests.scheduling import fleet

    fleet.host(gpus=0)
    inst = _instance(world)
    return Case(data={"project": str(world.project_a.pk), "name": "vm-new", "flavor": str(inst.flavor_id),
                      "image": str(inst.image_id), "queue_timeout_s": 600})


def _webhook(world) -> WebhookEndpoint:
    return WebhookEndpoint.objects.create(organization=world.org_a, url="https://hooks.test/a", secret="s")


def _reserve(world) -> Case:
    return Case(kwargs={"pk": OnDemandReserve.objects.create(gpu_model="H100-SXM5-80GB", gpus=8).pk})


ENTRIES = [
    Entry("GET", "/api/v1/capacity-reserves", STAFF_READ),
    Entry("GET", "/api/v1/capacity/fleet-figures", STAFF_READ),
    Entry("GET", "/api/v1/capacity-reserves/{pk}", STAFF_READ, _reserve),
    Entry("POST", "/api/v1/capacity-reserves", STAFF_CREATE,
          lambda w: Case(data={"gpu_model": "H100-SXM5-80GB", "zone": "", "gpus": 16})),
    Entry("DELETE", "/api/v1/capacity-reserves/{pk}", STAFF_DELETE, _reserve),
    Entry("GET", "/api/v1/queue-priorities", STAFF_READ),
    Entry("POST", "/api/v1/queue-priorities", STAFF_CREATE,
          lambda w: Case(data={"project": str(w.project_a.pk), "priority": 10})),
    Entry("GET", "/api/v1/leases", LIST),
    Entry("POST", "/api/v1/leases", BODY_CREATE, _lease_body),
    Entry("POST", "/api/v1/leases/check", expect(other_org=400, viewer=403, member=200, admin=200, read_token=403,
                                                  staff=403), _lease_body, audited=False),
    Entry("GET", "/api/v1/leases/{pk}", expect(), _lease_case()),
    Entry("PATCH", "/api/v1/leases/{pk}", WRITE, _lease_case({"name": "renamed"})),
    Entry("DELETE", "/api/v1/leases/{pk}", WRITE, _lease_case()),
    Entry("POST", "/api/v1/leases/{pk}/cancel", WRITE, _lease_case()),
    Entry("POST", "/api/v1/leases/{pk}/extend", WRITE, _lease_case({"end": "2099-01-01 13:00"})),
    Entry("POST", "/api/v1/leases/{pk}/shrink", WRITE, _lease_case({"end": "2099-01-01 11:00"})),
    Entry("GET", "/api/v1/capacity", LIST,
          lambda w: Case(query={"start": "2099-01-01T00:00:00Z", "end": "2099-01-02T00:00:00Z"})),
    Entry("POST", "/api/v1/instance-requests", BODY_ACCEPTED, _instance_request),
    Entry("GET", "/api/v1/queued-requests", LIST),
    Entry("GET", "/api/v1/queued-requests/{pk}", expect(), lambda w: Case(kwargs={"pk": _queued(w).pk})),
    Entry("GET", "/api/v1/instances/{pk}/capacity", expect(), lambda w: Case(kwargs={"pk": _instance(w).pk})),
    Entry("GET", "/api/v1/webhooks", LIST),
    Entry("GET", "/api/v1/webhooks/{pk}", expect(), lambda w: Case(kwargs={"pk": _webhook(w).pk})),
    Entry("POST", "/api/v1/webhooks", ORG_ADMIN_BODY_CREATE,
          lambda w: Case(data={"organization": str(w.org_a.pk), "url": "https://hooks.test/new"})),
    Entry("DELETE", "/api/v1/webhooks/{pk}", ORG_ADMIN_DELETE, lambda w: Case(kwargs={"pk": _webhook(w).pk})),
]
