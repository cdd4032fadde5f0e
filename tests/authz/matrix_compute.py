"""Authorization-matrix entries of the compute app: flavors, images, SSH keys, instances (with actions) and
clusters. Tenants write in their projects as members or admins; flavors and images are written by staff."""
import uuid

from apps.compute.models import Cluster, Flavor, Image, Instance, SshKey

from .framework import Case, Entry, expect

ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExDrqrBxQMwu8GE5t92+fB5/rnDc4YqlLtsc5HrGCgc authz"
LIST = expect(other_org=200)
ANY_USER = expect(other_org=200)
STAFF_CREATE = expect(other_org=403, viewer=403, member=403, admin=403, read_token=403, staff=201)
# A body naming project A is "Not found." (400, as an id that does not exist) for another tenant (ADR 0010).
CREATE = expect(other_org=400, viewer=403, member=201, admin=201, read_token=403, staff=403)
ACCEPTED = expect(other_org=404, viewer=403, member=202, admin=202, read_token=403, staff=403)
DELETE = expect(other_org=404, viewer=403, member=204, admin=204, read_token=403, staff=403)
# The serial log can hold secrets: project members and admins only, with a write-scoped token.
MEMBERS_READ = expect(other_org=404, viewer=403, member=200, admin=200, read_token=403, staff=403)


def _image() -> Image:
    return Image.objects.get_or_create(name="authz-img", defaults={
        "os": "ubuntu", "source_url": "https://images.test/u.qcow2", "checksum": "sha256:" + "a" * 64})[0]


def _flavor(world, private: bool = False) -> Flavor:
    """The public catalog flavor (one for every organization), or organization A's private one."""
    name = f"authz-private-{world.org_a.slug}" if private else "authz-c2"
    f = Flavor.objects.get_or_create(name=name, defaults={
        "vcpus": 2, "memory_mib": 2048, "visibility": "organization" if private else "public"})[0]
    if private:
        f.organizations.set([world.org_a])
    return f


def _key(world) -> SshKey:
    return SshKey.objects.create(project=world.project_a, name="k", public_key=ED25519, fingerprint="SHA256:x")


def _instance(world, status="active") -> Instance:
    return Instance.objects.create(project=world.project_a, name="vm", flavor=_flavor(world), image=_image(),
                                   status=status)


def _instance_with_domain(world) -> Instance:
    """An active instance whose domain is defined on libvirt's in-process test driver, as the worker would have it
    (the console log is read by the worker; in tests Celery runs inline). Its log file does not exist yet: ''."""
    from apps.compute.drivers.base import DomainSpec
    from apps.compute.drivers.libvirt.connection import get_connection
    from apps.compute.drivers.libvirt.xml import domain_xml
    from tests.scheduling import fleet

    host = fleet.host(gpus=0)
    host.libvirt_uri = "test:///default"
    host.save(update_fields=["libvirt_uri"])
    inst = _instance(world)
    inst.host = host
    inst.save(update_fields=["host"])
    xml = domain_xml(DomainSpec(uuid=inst.pk, vcpus=1, memory_mib=64),
                     serial_log_path=f"/nonexistent-gpucloud-authz/{inst.pk}-serial.log")
    get_connection("test:///default").defineXML(xml)
    return inst


def _pk(factory):
    return lambda w: Case(kwargs={"pk": factory(w).pk})


def _hosts(n: int = 1) -> None:
    """CPU-only hosts, cabled to one fabric's leaves, that can hold the matrix's 2-vCPU flavor: a create the fleet
    can place is accepted, one it could never hold is 422 unplaceable (ADR 0404), so every accepted-create entry
    brings its capacity (a cluster's members share one fabric)."""
    from tests.scheduling import fleet

    su, leaves = fleet.su_with_leaves(f"authz-su-{uuid.uuid4().hex[:8]}", rails=2)  # a second setup adds hosts
    for _ in range(n):
        fleet.cable(fleet.host(gpus=0, su=su), leaves)


def _instance_body(world) -> Case:
    _hosts()
    return Case(data={"project": str(world.project_a.pk), "name": "vm-new", "flavor": str(_flavor(world).pk),
                      "image": str(_image().pk)})


def _cluster_body(world) -> Case:
    _hosts(2)
    return Case(data={"project": str(world.project_a.pk), "name": "cl", "flavor": str(_flavor(world).pk),
                      "image": str(_image().pk), "size": 2})


def _resize(world) -> Case:
    from tests.scheduling import fleet

    inst = _instance(world, "stopped")
    Instance.objects.filter(pk=inst.pk).update(host=fleet.host(gpus=0))
    bigger = Flavor.objects.get_or_create(name="authz-c4", defaults={"vcpus": 4, "memory_mib": 4096})[0]
    return Case(kwargs={"pk": inst.pk}, data={"flavor": str(bigger.pk)})


def _cluster(world) -> Cluster:
    return Cluster.objects.create(project=world.project_a, name="cl", flavor=_flavor(world), image=_image(), size=0)


CHECK = expect(other_org=400, viewer=403, member=200, admin=200, read_token=403, staff=403)

ENTRIES = [
    Entry("GET", "/api/v1/flavors", LIST),
    Entry("GET", "/api/v1/flavors/{pk}", expect(), _pk(lambda w: _flavor(w, private=True))),
    Entry("POST", "/api/v1/flavors", STAFF_CREATE,
          lambda w: Case(data={"name": "new-flavor", "vcpus": 2, "memory_mib": 2048})),
    Entry("GET", "/api/v1/images", LIST),
    # images are provider-wide: the harness treats URL kwargs as organization-A identifiers and looks for them in
    # the body, so the lookup uses the upper-case spelling of the UUID
    Entry("GET", "/api/v1/images/{pk}", ANY_USER, lambda w: Case(kwargs={"pk": str(_image().pk).upper()})),
    Entry("POST", "/api/v1/images", STAFF_CREATE,
          lambda w: Case(data={"name": "new-img", "os": "debian", "source_url": "https://images.test/d.qcow2",
                               "checksum": "sha256:" + "b" * 64})),
    Entry("GET", "/api/v1/ssh-keys", LIST),
    Entry("GET", "/api/v1/ssh-keys/{pk}", expect(), _pk(_key)),
    Entry("POST", "/api/v1/ssh-keys", CREATE,
          lambda w: Case(data={"project": str(w.project_a.pk), "name": "laptop", "public_key": ED25519})),
    Entry("DELETE", "/api/v1/ssh-keys/{pk}", DELETE, _pk(_key)),
    Entry("GET", "/api/v1/instances", LIST),
    Entry("GET", "/api/v1/instances/{pk}", expect(), _pk(_instance)),
    Entry("POST", "/api/v1/instances", expect(other_org=400, viewer=403, member=202, admin=202, read_token=403,
                                              staff=403), _instance_body),
    # launch checks: the create's permission and references, a 200 answer, nothing written (not audited)
    Entry("POST", "/api/v1/instances/check", CHECK, _instance_body, audited=False),
    Entry("DELETE", "/api/v1/instances/{pk}", ACCEPTED, _pk(_instance)),
    Entry("POST", "/api/v1/instances/{pk}/stop", ACCEPTED, _pk(_instance)),
    Entry("POST", "/api/v1/instances/{pk}/start", ACCEPTED, _pk(lambda w: _instance(w, "stopped"))),
    Entry("POST", "/api/v1/instances/{pk}/reboot", ACCEPTED, _pk(_instance)),
    Entry("POST", "/api/v1/instances/{pk}/resize", ACCEPTED, _resize),
    Entry("GET", "/api/v1/instances/{pk}/console-log", MEMBERS_READ, _pk(_instance_with_domain)),
    Entry("GET", "/api/v1/clusters", LIST),
    Entry("GET", "/api/v1/clusters/{pk}", expect(), _pk(_cluster)),
    Entry("POST", "/api/v1/clusters", CREATE, _cluster_body),
    Entry("POST", "/api/v1/clusters/check", CHECK, _cluster_body, audited=False),
    Entry("DELETE", "/api/v1/clusters/{pk}", ACCEPTED, _pk(_cluster)),
]
