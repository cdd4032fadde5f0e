"""Volumes at instance create (`volumes` of `POST /api/v1/instances`): new and existing volumes are checked
before anything is written, attached by the create's `prepare_volumes` step, part of the defined domain; a boot
volume replaces the image disk; a failed create releases what it reserved; a host-local volume places the
instance on its host. Compute and storage on their fakes, the real ledger, placement and step runner."""

from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET

import pytest

from apps.compute.drivers.libvirt.xml import domain_xml
from apps.compute.models import Instance
from apps.compute.services.hypervisor import driver_for_host
from apps.inventory.models import Host
from apps.operations.models import Operation
from apps.scheduling.models import Allocation
from apps.storage.drivers import forget_drivers, get_driver
from apps.storage.drivers.base import GIB, disk_serial
from apps.storage.drivers.fake import FakeStorageDriver
from apps.storage.models import Volume, VolumeAttachment, VolumeType
from apps.tenancy.models import Quota

from .conftest import create_body, drive, gpu_host

pytestmark = pytest.mark.django_db


@pytest.fixture
def storage(world, settings, monkeypatch, tmp_path):
    """Two fake hypervisors (the first also serves the shared pool), a shared and a host-local volume type, and
    an image directory (so an instance without a boot volume gets an image disk)."""
    hosts = [gpu_host(gpus=2, threads=16, memory_mib=131072) for _ in range(2)]
    settings.DRIVERS = {**settings.DRIVERS, "storage": "apps.storage.drivers.fake:FakeStorageDriver"}
    monkeypatch.setenv("STORAGE_SHARED_POOL_URI", hosts[0].libvirt_uri)
    monkeypatch.setenv("COMPUTE_IMAGE_DIR", str(tmp_path))
    FakeStorageDriver.reset()
    forget_drivers()
    ssd = VolumeType.objects.create(name="ssd", pool="ssd", pool_target_path="/srv/ssd", max_size_gib=100)
    local = VolumeType.objects.create(name="nvme-local", pool="nvme", pool_target_path="/srv/nvme",
                                      host_local=True)
    yield hosts, ssd, local
    FakeStorageDriver.reset()
    forget_drivers()


def _ok(resp, status: str = "succeeded") -> Operation:
    assert resp.status_code == 202, resp.content
    op = drive(resp.json()["operation"]["id"])
    assert op.status == status, (op.error_code, op.error_detail)
    return op


def _volume(world, vtype, name: str, size_gib: int = 1, **extra) -> str:
    resp = world.client_a.post("/api/v1/volumes/", {"project": str(world.project_a.pk), "name": name,
                                                    "size_gib": size_gib, "volume_type": str(vtype.pk), **extra},
                               format="json")
    _ok(resp)
    return resp.json()["volume"]["id"]


def _local_volume(world, local, host, name: str) -> Volume:
    """An available host-local volume on `host` (as if made there for an earlier instance)."""
    from apps.storage.services.backend import pool_spec, volume_spec

    vol = Volume.objects.create(project=world.project_a, name=name, size_gib=10, volume_type=local,
                                status="available", host=host, zone=host.zone)
    drv = get_driver(host.libvirt_uri)
    drv.pool_ensure(pool_spec(local))
    Volume.objects.filter(pk=vol.pk).update(backend_path=drv.volume_create(volume_spec(vol)).path)
    return vol


def _counts() -> tuple:
    return (Instance.objects.count(), Volume.objects.count(), VolumeAttachment.objects.count(),
            Allocation.objects.count(), Operation.objects.count())


def _spec(inst: Instance):
    return driver_for_host(inst.host).host.specs[inst.pk]


def test_new_and_existing_volumes_are_attached_by_the_create_and_delete_honours_delete_on_termination(
        world, storage):
    _hosts, ssd, _local = storage
    data = _volume(world, ssd, "data", 3)
    body = create_body(world, world.gpu1, volumes=[
        {"size_gib": 5, "volume_type": str(ssd.pk), "name": "scratch", "delete_on_termination": True},
        {"id": data}])
    resp = world.client_a.post("/api/v1/instances/", body, format="json")
    assert resp.status_code == 202, resp.content
    seen = world.client_a.get(f"/api/v1/volumes/{data}/").json()
    assert (seen["status"], [(a["device"], a["status"]) for a in seen["attachments"]]) == (
        "attaching", [("vdc", "reserved")])
    op = _ok(resp)
    assert "prepare_volumes" in op.steps_done
    inst = Instance.objects.get(pk=resp.json()["instance"]["id"])
    scratch = Volume.objects.get(name="scratch")
    assert (scratch.size_gib, scratch.delete_on_termination) == (5, True)
    assert get_driver(storage[0][0].libvirt_uri).volume_get("ssd", str(scratch.pk)).capacity_bytes == 5 * GIB
    listed = world.client_a.get(f"/api/v1/volumes/?instance={inst.pk}").json()["results"]
    assert sorted((v["name"], v["status"], [a["device"] for a in v["attachments"]]) for v in listed) == [
        ("data", "in-use", ["vdc"]), ("scratch", "in-use", ["vdb"])]
    spec = _spec(inst)
    assert spec.disk is not None  # the image disk stays the boot disk
    assert [(d.target_dev, d.serial, d.boot) for d in spec.volumes] == [
        ("vdb", disk_serial(scratch.pk), False), ("vdc", disk_serial(data), False)]

    _ok(world.client_a.delete(f"/api/v1/instances/{inst.pk}/"))
    assert (Volume.objects.get(pk=data).status, Volume.objects.get(pk=scratch.pk).status,
            VolumeAttachment.objects.count()) == ("available", "deleting", 0)
    (vop,) = Operation.objects.filter(target_id=scratch.pk, kind="volume.delete")
    assert drive(vop.pk).status == "succeeded"
    assert Volume.objects.get(pk=scratch.pk).status == "deleted"


def test_a_volume_quota_exceeded_creates_nothing(world, storage):
    _hosts, ssd, _local = storage
    Quota.objects.create(organization=world.org_a, project=world.project_a, resource="volume_gib:ssd", limit=8)
    before = _counts()
    body = create_body(world, world.gpu1, volumes=[{"size_gib": 5, "volume_type": str(ssd.pk)},
                                                   {"size_gib": 4, "volume_type": str(ssd.pk)}])
    resp = world.client_a.post("/api/v1/instances/", body, format="json")
    assert resp.status_code == 422, resp.content
    got = resp.json()
    assert (got["code"], got["resource"], got["limit"], got["requested"]) == (
        "quota_exceeded", "volume_gib:ssd", 8, 9)
    assert _counts() == before  # no instance, volume, attachment, allocation or operation
    checked = world.client_a.post("/api/v1/instances/check/", body, format="json").json()
    assert checked["code"] == "quota_exceeded"  # the launch check answers as the create


def test_another_tenants_volume_answers_as_a_missing_one_and_a_volume_in_use_is_409(world, storage):
    _hosts, ssd, _local = storage
    theirs = Volume.objects.create(project=world.project_b, name="theirs", size_gib=1, volume_type=ssd,
                                   status="available")
    before = _counts()
    answers = []
    for vol_id in (str(theirs.pk), str(uuid.uuid4())):
        resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1, volumes=[{"id": vol_id}]),
                                   format="json")
        body = resp.json()
        body.pop("request_id", None)
        answers.append((resp.status_code, str(body).replace(vol_id, "<id>")))
    assert answers[0] == answers[1] and answers[0][0] == 400, answers
    assert _counts() == before

    used = _volume(world, ssd, "used")
    first = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1, "vm-1",
                                                                  volumes=[{"id": used}]), format="json")
    first_op = _ok(first)
    before = _counts()
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1, "vm-2", volumes=[{"id": used}]),
                               format="json")
    assert (resp.status_code, resp.json()["code"], resp.json()["instances"]) == (
        409, "volume_in_use", [str(first_op.target_id)])
    assert _counts() == before
    checked = world.client_a.post("/api/v1/instances/check/", create_body(world, world.gpu1, "vm-2", volumes=[
        {"id": used}]), format="json").json()
    assert (checked["placeable"], checked["code"], checked["instances"], checked["volume"]) == (
        False, "volume_in_use", [str(first_op.target_id)], used)


@pytest.mark.parametrize("index", [0, 1])
def test_a_host_local_volume_places_the_instance_on_its_host(world, storage, index):
    hosts, _ssd, local = storage
    vol = _local_volume(world, local, hosts[index], "scratch")
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1, volumes=[{"id": str(vol.pk)}]),
                               format="json")
    _ok(resp)
    inst = Instance.objects.get(pk=resp.json()["instance"]["id"])
    assert inst.host_id == hosts[index].pk
    assert [d.serial for d in _spec(inst).volumes] == [disk_serial(vol.pk)]

    # the volume's host cannot take another instance now: the create is refused, not placed elsewhere
    Host.objects.filter(pk=hosts[index].pk).update(state="cordoned")
    other = _local_volume(world, local, hosts[index], "scratch-2")
    before = _counts()
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1, "vm-2",
                                                                 volumes=[{"id": str(other.pk)}]), format="json")
    assert (resp.status_code, resp.json()["code"]) == (409, "capacity_unavailable"), resp.content
    assert _counts() == before


def test_boot_from_a_new_volume(world, storage):
    _hosts, ssd, _local = storage
    body = create_body(world, world.gpu1, volumes=[{"boot": True, "volume_type": str(ssd.pk), "size_gib": 100},
                                                   {"size_gib": 2, "volume_type": str(ssd.pk)}])
    resp = world.client_a.post("/api/v1/instances/", body, format="json")
    _ok(resp)
    inst = Instance.objects.get(pk=resp.json()["instance"]["id"])
    boot = Volume.objects.get(name="vm-1-boot")
    assert (boot.source_image_id, boot.size_gib, boot.status) == (world.image.pk, 100, "in-use")
    spec = _spec(inst)
    assert spec.disk is None  # no image disk: the volume is the boot disk
    assert [(d.target_dev, d.boot) for d in spec.volumes] == [("vda", True), ("vdb", False)]
    root = ET.fromstring(domain_xml(spec, disk_path="", seed_path=""))
    assert root.find("os/boot") is None
    (first,) = [d for d in root.findall("devices/disk") if d.find("boot") is not None]
    assert (first.find("target").get("dev"), first.find("boot").get("order"), first.find("source").get("file"),
            first.find("serial").text) == ("vda", "1", boot.backend_path, disk_serial(boot.pk))

    refused = world.client_a.post(f"/api/v1/volumes/{boot.pk}/detach/", {"instance": str(inst.pk)}, format="json")
    got = refused.json()
    assert (refused.status_code, got["code"], got["instances"], got["instance_status"]) == (
        409, "boot_volume_detach_not_allowed", [str(inst.pk)], "active")


def test_a_boot_volume_smaller_than_the_flavor_disk_is_400(world, storage):
    _hosts, ssd, _local = storage
    before = _counts()
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1, volumes=[
        {"boot": True, "volume_type": str(ssd.pk), "size_gib": 10}]), format="json")
    assert (resp.status_code, resp.json()["errors"]) == (400, {"volumes": ["size_gib 100..100"]}), resp.content
    assert _counts() == before


@pytest.mark.parametrize("failure", ["placement", "define"])
def test_a_failed_create_releases_its_volumes(world, storage, failure):
    hosts, ssd, _local = storage
    data = _volume(world, ssd, "data")
    body = create_body(world, world.gpu1, volumes=[
        {"size_gib": 2, "volume_type": str(ssd.pk), "name": "scratch", "delete_on_termination": True},
        {"size_gib": 2, "volume_type": str(ssd.pk), "name": "keep"},
        {"id": data, "delete_on_termination": True}])
    resp = world.client_a.post("/api/v1/instances/", body, format="json")
    if failure == "placement":  # the capacity the create was admitted on is gone when it places
        Host.objects.filter(pk__in=[h.pk for h in hosts]).update(state="cordoned")
    else:
        for h in hosts:
            driver_for_host(h).fail_define[h.libvirt_uri] = "define_failed"
    op = _ok(resp, status="failed")
    assert op.error_code == ("capacity_unavailable" if failure == "placement" else "define_failed")
    assert Instance.objects.get(pk=op.target_id).status == "error"
    assert VolumeAttachment.objects.count() == 0
    statuses = {v.name: v.status for v in Volume.objects.all()}
    # the existing volume is available again (a failed create never deletes it), the one made for the
    # instance with delete_on_termination goes, the other stays (made by its own operation if never made)
    assert (statuses["data"], statuses["scratch"]) == ("available", "deleting")
    assert statuses["keep"] == ("creating" if failure == "placement" else "available")
    for vop in Operation.objects.filter(kind__in=("volume.delete", "volume.create"), status="pending"):
        assert drive(vop.pk).status == "succeeded"
    assert {v.name: v.status for v in Volume.objects.all()} == {
        "data": "available", "scratch": "deleted", "keep": "available"}
    # the failed create did not change the existing volume's delete_on_termination (it asked for true)
    assert world.client_a.get(f"/api/v1/volumes/{data}/").json()["delete_on_termination"] is False


def test_an_attached_volume_grows_under_its_running_guest(world, storage):
    hosts, ssd, _local = storage
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
    _ok(resp)
    inst_id = resp.json()["instance"]["id"]
    vol = _volume(world, ssd, "data", 3)
    _ok(world.client_a.post(f"/api/v1/volumes/{vol}/attach/", {"instance": inst_id}, format="json"))
    shrink = world.client_a.post(f"/api/v1/volumes/{vol}/extend/", {"size_gib": 2}, format="json")
    assert (shrink.status_code, shrink.json()["code"]) == (400, "size_must_grow")
    grow = world.client_a.post(f"/api/v1/volumes/{vol}/extend/", {"size_gib": 7}, format="json")
    assert grow.json()["volume"]["status"] == "extending"
    _ok(grow)
    got = world.client_a.get(f"/api/v1/volumes/{vol}/").json()
    assert (got["status"], got["size_gib"], [a["status"] for a in got["attachments"]]) == ("in-use", 7, ["attached"])
    # the pool refuses to resize an image a running guest holds: only the guest's QEMU (blockResize) grew it
    assert get_driver(hosts[0].libvirt_uri).volume_get("ssd", vol).capacity_bytes == 7 * GIB


def test_a_retried_create_with_an_idempotency_key_makes_its_volumes_once(world, storage):
    _hosts, ssd, _local = storage
    body = create_body(world, world.gpu1, volumes=[{"size_gib": 2, "volume_type": str(ssd.pk), "name": "once"}])
    first = world.client_a.post("/api/v1/instances/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-volumes")
    again = world.client_a.post("/api/v1/instances/", body, format="json", HTTP_IDEMPOTENCY_KEY="k-volumes")
    assert (first.status_code, again.status_code) == (202, 202), again.content
    assert again.json()["instance"]["id"] == first.json()["instance"]["id"]
    assert (Instance.objects.count(), Volume.objects.filter(name="once").count(),
            VolumeAttachment.objects.count()) == (1, 1, 1)


@pytest.mark.django_db(transaction=True)
def test_parallel_creates_naming_one_new_volume_or_one_existing_volume(world, storage):
    from tests.parallel import outcome, post_parallel

    _hosts, ssd, _local = storage
    Quota.objects.filter(organization=world.org_a).update(limit=10**9)
    n = 6
    bodies = [create_body(world, world.cpu, f"vm-{i}", volumes=[{"size_gib": 1, "volume_type": str(ssd.pk),
                                                                  "name": "shared-name"}]) for i in range(n)]
    assert outcome(post_parallel(world.client_a, "/api/v1/instances/", bodies)) == {
        (202, None): 1, (409, "name_taken"): n - 1}
    assert Volume.objects.filter(name="shared-name").count() == 1

    existing = _volume(world, ssd, "one")
    bodies = [create_body(world, world.cpu, f"vm-x{i}", volumes=[{"id": existing}]) for i in range(n)]
    assert outcome(post_parallel(world.client_a, "/api/v1/instances/", bodies)) == {
        (202, None): 1, (409, "volume_in_use"): n - 1}
    assert VolumeAttachment.objects.filter(volume_id=existing).count() == 1


def test_a_new_volume_without_a_name_is_named_after_the_instance_within_63_characters(world, storage):
    _hosts, ssd, _local = storage
    name = "a" * 63
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.cpu, name, volumes=[
        {"size_gib": 1, "volume_type": str(ssd.pk)}]), format="json")
    assert resp.status_code == 202, resp.content
    assert list(Volume.objects.values_list("name", flat=True)) == ["a" * 59 + "-vdb"]


def test_bad_volume_requests_are_400_and_write_nothing(world, storage):
    _hosts, ssd, _local = storage
    existing = _volume(world, ssd, "data")
    off = VolumeType.objects.create(name="off", pool="off", pool_target_path="/srv/off", is_active=False)
    new = {"size_gib": 1, "volume_type": str(ssd.pk)}
    cases = [
        ([{"size_gib": 5}], 400, "validation_error"),
        ([{"id": existing, "size_gib": 1}], 400, "validation_error"),
        ([{**new, "boot": True}, {**new, "boot": True, "name": "b2"}], 400, "validation_error"),
        ([{"id": existing}, {"id": existing}], 400, "validation_error"),
        ([{**new, "name": "bad name!"}], 400, "validation_error"),
        ([{**new, "name": "same"}, {**new, "name": "same"}], 400, "validation_error"),
        ([{"size_gib": 1, "volume_type": str(off.pk)}], 400, "validation_error"),  # not offered: Not found.
        ([{**new, "size_gib": 101}], 400, "validation_error"),
        ("not a list", 400, "validation_error"),
        ([{**new, "name": f"v{i}"} for i in range(17)], 409, "attachment_limit_reached"),
        ([{**new, "name": f"v{i}"} for i in range(18)], 400, "validation_error"),
        ([{**new, "name": "data"}], 409, "name_taken"),
    ]
    before = _counts()
    for volumes, status, code in cases:
        resp = world.client_a.post("/api/v1/instances/", create_body(world, world.cpu, volumes=volumes),
                                   format="json")
        assert (resp.status_code, resp.json()["code"]) == (status, code), (volumes, resp.content)
        assert resp["Content-Type"] == "application/problem+json"
    assert _counts() == before


def test_only_a_bootable_volume_is_a_boot_volume(world, storage):
    _hosts, ssd, _local = storage
    blank = _volume(world, ssd, "blank", 10)
    body = create_body(world, world.gpu1, volumes=[{"boot": True, "id": blank}])
    before = _counts()
    resp = world.client_a.post("/api/v1/instances/", body, format="json")
    assert (resp.status_code, resp.json()["code"], resp.json()["volume"]) == (409, "volume_not_bootable", blank)
    assert _counts() == before
    checked = world.client_a.post("/api/v1/instances/check/", body, format="json").json()
    assert (checked["placeable"], checked["code"]) == (False, "volume_not_bootable")
    assert world.client_a.get(f"/api/v1/volumes/{blank}/").json()["bootable"] is False

    system = _volume(world, ssd, "system", 10, source_image=str(world.image.pk))
    assert world.client_a.get(f"/api/v1/volumes/{system}/").json()["bootable"] is True
    _ok(world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1, "vm-2", volumes=[
        {"boot": True, "id": system, "delete_on_termination": True}]), format="json"))
    assert VolumeAttachment.objects.get(volume_id=system).boot is True
    assert Volume.objects.get(pk=system).delete_on_termination is True  # changed once the create attached it
