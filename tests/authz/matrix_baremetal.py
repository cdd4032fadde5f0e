"""Authorization-matrix entries of the bare-metal app: nodes (staff operators only), exit receipts (tenants read
their projects'), the public receipt key, and the rebuild action of /instances (bare-metal instances)."""
import uuid

from apps.baremetal.models import BaremetalNode, ExitReceipt
from apps.compute.models import Flavor, Image, Instance
from apps.inventory.models import Host

from .framework import Case, Entry, expect

STAFF = expect(other_org=404, viewer=404, member=404, admin=404, read_token=404, staff=200)
STAFF_ACCEPTED = expect(other_org=404, viewer=404, member=404, admin=404, read_token=404, staff=202)
PUBLIC = expect(anonymous=200, other_org=200)
ACCEPTED = expect(other_org=404, viewer=403, member=202, admin=202, read_token=403, staff=403)


def _host(name: str) -> Host:
    from tests.scheduling import fleet

    host = Host.objects.filter(name=name).first()
    if host is None:
        host = fleet.host(gpus=8)
        Host.objects.filter(pk=host.pk).update(name=name, provisioning_kind="baremetal")
        host.refresh_from_db()
    return host


def _node(world) -> BaremetalNode:
    host = _host(f"authz-bm-{world.org_a.slug}")
    return BaremetalNode.objects.get_or_create(host=host, defaults={
        "driver": "fake-hardware", "ironic_id": str(uuid.uuid4()), "provision_state": "available"})[0]


def _flavor() -> Flavor:
    return Flavor.objects.get_or_create(name="authz-bm-h100x8", defaults={
        "kind": "baremetal", "vcpus": 128, "memory_mib": 1024 * 1024, "gpu_form": "gpu",
        "gpu_model": "H100-SXM5-80GB", "gpu_count": 8})[0]


def _image() -> Image:
    return Image.objects.get_or_create(name="authz-img", defaults={
        "os": "ubuntu", "source_url": "https://images.test/u.qcow2", "checksum": "sha256:" + "a" * 64})[0]


def _instance(world) -> Instance:
    node = _node(world)
    return Instance.objects.create(project=world.project_a, name="bm", flavor=_flavor(), image=_image(),
                                   status="active", host=node.host)


def _receipt(world) -> ExitReceipt:
    node = _node(world)
    return ExitReceipt.objects.create(project=world.project_a, instance_id=uuid.uuid4(), node=node,
                                      payload="{}", signature="AAAA", key_id="0" * 16)


def _enroll(world) -> Case:
    host = _host(f"authz-bm-new-{world.org_a.slug}")
    return Case(data={"host": str(host.pk), "driver": "fake-hardware"})


ENTRIES = [
    Entry("GET", "/api/v1/bare-metal/nodes", STAFF, lambda w: (_node(w), Case())[1]),
    Entry("GET", "/api/v1/bare-metal/nodes/{pk}", STAFF, lambda w: Case(kwargs={"pk": _node(w).pk})),
    Entry("POST", "/api/v1/bare-metal/nodes", STAFF_ACCEPTED, _enroll),
    Entry("POST", "/api/v1/bare-metal/nodes/{pk}/recover", STAFF_ACCEPTED,
          lambda w: Case(kwargs={"pk": _node(w).pk})),
    Entry("GET", "/api/v1/bare-metal/exit-receipts", expect(other_org=200), lambda w: (_receipt(w), Case())[1]),
    Entry("GET", "/api/v1/bare-metal/exit-receipts/{pk}", expect(), lambda w: Case(kwargs={"pk": _receipt(w).pk})),
    Entry("GET", "/api/v1/bare-metal/receipt-key", PUBLIC, audited=False, public=True),
    Entry("POST", "/api/v1/instances/{pk}/rebuild", ACCEPTED, lambda w: Case(kwargs={"pk": _instance(w).pk},
                                                                              data={})),
]
