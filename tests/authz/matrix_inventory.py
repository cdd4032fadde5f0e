"""Authorization-matrix entries of the inventory app: the staff fleet API, the GPU model catalog (any
authenticated user), fleet import/export, and the node-agent endpoints (agent credential only)."""
from apps.inventory.models import Incident
from apps.inventory.services.agent import enrollment_token_create
from tests.inventory.helpers import make_host as _make_host

from .framework import Case, Entry, expect

# staff-only: tenants (any organization, any role, read tokens) get 404 as for what they may not see, anonymous 401
STAFF_READ = expect(other_org=404, viewer=404, member=404, admin=404, read_token=404, staff=200)


def STAFF_WRITE(ok=200):  # noqa: N802
    return expect(other_org=404, viewer=404, member=404, admin=404, read_token=404, staff=ok)


ANY_USER = expect(other_org=200)


def make_host(name, **kwargs):
    """The provider's host `name` (made once: both organizations' setups in one transaction share it)."""
    from apps.inventory.models import Host

    return Host.objects.filter(name=name).first() or _make_host(name, **kwargs)
AGENT_ONLY = expect(other_org=401, viewer=401, member=401, admin=401, read_token=401, staff=401)


def _host(state="available", gpus=1, data=None):
    def setup(world) -> Case:
        host = make_host("authz-h1", state=state, gpus=gpus, hca=1)
        return Case(kwargs={"pk": host.pk}, data={"reason": "authz matrix"} if data is None else data)
    return setup


def _obj(getter):
    def setup(world) -> Case:
        host = make_host("authz-h1", gpus=1, hca=1)
        return Case(kwargs={"pk": getter(host).pk}, data={"reason": "authz matrix"})
    return setup


def _failed_scrub(world) -> Case:
    """A GPU whose scrub failed (the only state in which staff may queue it again)."""
    host = make_host("authz-h1", gpus=1, hca=1)
    gpu = host.gpus.first()
    gpu.scrub_state, gpu.scrub_reason = "scrub_failed", "reset_gpu failed: authz"
    gpu.save(update_fields=["scrub_state", "scrub_reason"])
    return Case(kwargs={"pk": gpu.pk}, data={"reason": "authz matrix"})


def _incident(host):
    return Incident.objects.create(host=host, start=host.created_at, reason="authz")


def _command(world) -> Case:
    host = make_host("authz-h1", gpus=1)
    return Case(data={"host": str(host.pk), "kind": "reset_gpu", "payload": {"gpu_index": 0}})


def _enroll(world) -> Case:
    host = make_host("authz-h1", state="enrolling")
    _, token = enrollment_token_create(actor=None, host=host)
    return Case(data={"token": token, "inventory": {}, "agent_version": "test"})


def _fleet(world) -> Case:
    return Case(data={"document": "version: 1\nregions: [{name: authz-region}]\n", "dry_run": True})


def _collection(path, getter):
    return [Entry("GET", f"/api/v1/{path}", STAFF_READ),
            Entry("GET", f"/api/v1/{path}/{{pk}}", STAFF_READ, _obj(getter))]


ENTRIES = [
    # the public catalog: any authenticated caller, read scope enough (other_org sees the provider's regions too)
    Entry("GET", "/api/v1/regions", ANY_USER),
    Entry("GET", "/api/v1/regions/{pk}", ANY_USER, _obj(lambda h: h.zone.region), public=True),
    Entry("GET", "/api/v1/zones", ANY_USER),
    Entry("GET", "/api/v1/zones/{pk}", ANY_USER, _obj(lambda h: h.zone), public=True),
    *_collection("scalable-units", lambda h: h.scalable_unit),
    *_collection("racks", lambda h: h.rack),
    *_collection("fabrics", lambda h: h.hca_ports.first().fabric),
    *_collection("switches", lambda h: h.hca_ports.first().leaf_switch),
    *_collection("hosts", lambda h: h),
    *_collection("gpus", lambda h: h.gpus.first()),
    *_collection("hca-ports", lambda h: h.hca_ports.first()),
    *_collection("incidents", _incident),
    Entry("PATCH", "/api/v1/incidents/{pk}", STAFF_WRITE(), _obj(_incident)),
    *_collection("agent-commands", lambda h: __import__("apps.inventory.services.agent", fromlist=["x"])
                 .agent_command_enqueue(actor=None, host=h, kind="reset_gpu", payload={"gpu_index": 0})),
    Entry("POST", "/api/v1/agent-commands", STAFF_WRITE(201), _command),
    Entry("POST", "/api/v1/hosts/{pk}/cordon", STAFF_WRITE(), _host()),
    Entry("POST", "/api/v1/hosts/{pk}/drain", STAFF_WRITE(), _host()),
    Entry("POST", "/api/v1/hosts/{pk}/maintenance", STAFF_WRITE(), _host()),
    Entry("POST", "/api/v1/hosts/{pk}/mark-faulty", STAFF_WRITE(), _host()),
    Entry("POST", "/api/v1/hosts/{pk}/mark-available", STAFF_WRITE(), _host(state="cordoned")),
    Entry("POST", "/api/v1/hosts/{pk}/retire", STAFF_WRITE(), _host(state="maintenance")),
    Entry("POST", "/api/v1/hosts/{pk}/spare", STAFF_WRITE(), _host(data={"spare": True, "reason": "authz matrix"})),
    Entry("POST", "/api/v1/hosts/{pk}/enrollment-token", STAFF_WRITE(201), _host(state="enrolling", data={})),
    Entry("POST", "/api/v1/gpus/{pk}/mark-faulty", STAFF_WRITE(), _obj(lambda h: h.gpus.first())),
    Entry("POST", "/api/v1/gpus/{pk}/mark-healthy", STAFF_WRITE(), _obj(lambda h: h.gpus.first())),
    Entry("POST", "/api/v1/gpus/{pk}/scrub", STAFF_WRITE(), _failed_scrub),
    Entry("GET", "/api/v1/gpu-models", ANY_USER),
    # the catalog is public: the harness treats URL kwargs as organization-A identifiers and looks for them in the
    # body, so the lookup uses the (case-insensitive) lower-case spelling of the key
    Entry("GET", "/api/v1/gpu-models/{key}", ANY_USER, lambda w: Case(kwargs={"key": "h100-sxm5-80gb"})),
    Entry("POST", "/api/v1/fleet/import", STAFF_WRITE(), _fleet, audited=False),
    Entry("GET", "/api/v1/fleet/export", STAFF_READ),
    # the one-time token in the body is the credential: whoever holds it enrolls the host
    Entry("POST", "/api/v1/agent/enroll", expect(anonymous=201, other_org=201, viewer=201, member=201, admin=201,
                                                 read_token=201, staff=201), _enroll),
    Entry("POST", "/api/v1/agent/heartbeat", AGENT_ONLY, lambda w: Case(data={"agent_version": "x"})),
    Entry("GET", "/api/v1/agent/commands", AGENT_ONLY),
    Entry("POST", "/api/v1/agent/commands/{pk}/result", AGENT_ONLY,
          lambda w: Case(kwargs={"pk": "0190aaaa-0000-7000-8000-000000000000"}, data={"succeeded": True})),
]
