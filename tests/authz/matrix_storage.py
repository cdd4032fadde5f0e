"""Authorization-matrix entries of the storage app: volume types (tenants read, staff write), volumes (with the
extend, attach and detach actions) and snapshots. Tenants write in their projects as members or admins."""
from apps.compute.models import Flavor, Image, Instance
from apps.storage.models import Snapshot, Volume, VolumeAttachment, VolumeType

from .framework import Case, Entry, expect

LIST = expect(other_org=200)
STAFF_CREATE = expect(other_org=403, viewer=403, member=403, admin=403, read_token=403, staff=201)
STAFF_CHANGE = expect(other_org=403, viewer=403, member=403, admin=403, read_token=403, staff=200)
# A body naming project A (or its volume) is "Not found." (400, as an id that does not exist) for another tenant.
ACCEPTED_CREATE = expect(other_org=400, viewer=403, member=202, admin=202, read_token=403, staff=403)
ACCEPTED = expect(other_org=404, viewer=403, member=202, admin=202, read_token=403, staff=403)
CHANGE = expect(other_org=404, viewer=403, member=200, admin=200, read_token=403, staff=403)


def _type() -> VolumeType:
    """The provider's shared tier (one for every organization; fetched when a mirrored setup made it), beside a
    retired one that only staff see (what the `volume_type` filters are probed with)."""
    VolumeType.objects.get_or_create(name="authz-retired", defaults={"pool": "authz-old", "is_active": False})
    return VolumeType.objects.get_or_create(name="authz-ssd", defaults={"pool": "authz-ssd",
                                                                        "pool_target_path": "/srv/authz"})[0]


def _volume(world, status="available", name="data") -> Volume:
    return Volume.objects.create(project=world.project_a, name=name, size_gib=10, volume_type=_type(), status=status)


def _instance(world) -> Instance:
    from tests.scheduling import fleet

    image = Image.objects.get_or_create(name="authz-img", defaults={
        "os": "ubuntu", "source_url": "https://images.test/u.qcow2", "checksum": "sha256:" + "a" * 64})[0]
    flavor = Flavor.objects.get_or_create(name="authz-c2", defaults={"vcpus": 2, "memory_mib": 2048})[0]
    return Instance.objects.create(project=world.project_a, name="vm", flavor=flavor, image=image, status="active",
                                   host=fleet.host(gpus=0))


def _attach(world) -> Case:
    return Case(kwargs={"pk": _volume(world).pk}, data={"instance": str(_instance(world).pk)})


def _detach(world) -> Case:
    volume, instance = _volume(world, "in-use"), _instance(world)
    VolumeAttachment.objects.create(volume=volume, instance=instance, device="vdb", status="attached")
    return Case(kwargs={"pk": volume.pk}, data={"instance": str(instance.pk)})


def _snapshot(world) -> Snapshot:
    volume = _volume(world, name="snapped")
    return Snapshot.objects.create(project=world.project_a, volume=volume, name="snap", size_gib=10,
                                   status="available")


def _pk(factory):
    return lambda w: Case(kwargs={"pk": factory(w).pk})


ENTRIES = [
    Entry("GET", "/api/v1/volume-types", LIST),
    Entry("GET", "/api/v1/volume-types/{pk}", expect(other_org=200), lambda w: Case(kwargs={"pk": _type().pk}),
          public=True),
    Entry("POST", "/api/v1/volume-types", STAFF_CREATE,
          lambda w: Case(data={"name": "nvme-local", "pool": "nvme", "pool_target_path": "/srv/nvme",
                               "host_local": True})),
    Entry("PATCH", "/api/v1/volume-types/{pk}", STAFF_CHANGE,
          lambda w: Case(kwargs={"pk": _type().pk}, data={"description": "replicated SSD"}), public=True),
    Entry("GET", "/api/v1/volumes", LIST),
    Entry("POST", "/api/v1/volumes", ACCEPTED_CREATE,
          lambda w: Case(data={"project": str(w.project_a.pk), "name": "new-vol", "size_gib": 5,
                               "volume_type": str(_type().pk)})),
    Entry("GET", "/api/v1/volumes/{pk}", expect(), _pk(_volume)),
    Entry("PATCH", "/api/v1/volumes/{pk}", CHANGE, lambda w: Case(kwargs={"pk": _volume(w).pk},
                                                                   data={"name": "renamed"})),
    Entry("DELETE", "/api/v1/volumes/{pk}", ACCEPTED, _pk(_volume)),
    Entry("POST", "/api/v1/volumes/{pk}/extend", ACCEPTED,
          lambda w: Case(kwargs={"pk": _volume(w).pk}, data={"size_gib": 20})),
    Entry("POST", "/api/v1/volumes/{pk}/attach", ACCEPTED, _attach),
    Entry("POST", "/api/v1/volumes/{pk}/detach", ACCEPTED, _detach),
    Entry("GET", "/api/v1/snapshots", LIST),
    Entry("POST", "/api/v1/snapshots", ACCEPTED_CREATE,
          lambda w: Case(data={"volume": str(_volume(w).pk), "name": "nightly"})),
    Entry("GET", "/api/v1/snapshots/{pk}", expect(), _pk(_snapshot)),
    Entry("DELETE", "/api/v1/snapshots/{pk}", ACCEPTED, _pk(_snapshot)),
]
