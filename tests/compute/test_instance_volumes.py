"""Attached volumes and the instance lifecycle (the seams of `apps.compute.services.volumes`, which storage fills):
a redefine of the domain keeps the attached disks, and the instance's delete workflow releases its volumes.
Compute and storage on their fakes, the real ledger and step runner."""

from __future__ import annotations

import pytest

from apps.compute.models import Instance
from apps.compute.services.hypervisor import driver_for_host
from apps.operations.models import Operation
from apps.storage.drivers import forget_drivers
from apps.storage.drivers.base import disk_serial
from apps.storage.drivers.fake import FakeStorageDriver
from apps.storage.models import Volume, VolumeAttachment, VolumeType

from .conftest import create_body, drive, gpu_host

pytestmark = pytest.mark.django_db


@pytest.fixture
def stack(world, settings, monkeypatch):
    """An instance running on a fake host that also serves the shared pool; a shared volume type."""
    host = gpu_host(gpus=2, threads=32, memory_mib=262144)  # per NUMA node 16 threads, 128 GiB: the resize fits its GPU's node
    settings.DRIVERS = {**settings.DRIVERS, "storage": "apps.storage.drivers.fake:FakeStorageDriver"}
    monkeypatch.setenv("STORAGE_SHARED_POOL_URI", host.libvirt_uri)
    FakeStorageDriver.reset()
    forget_drivers()
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1), format="json")
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    ssd = VolumeType.objects.create(name="ssd", pool="ssd", pool_target_path="/srv/ssd", max_size_gib=100)
    yield host, Instance.objects.get(pk=resp.data["instance"]["id"]), ssd
    FakeStorageDriver.reset()
    forget_drivers()


def _ok(resp) -> Operation:
    assert resp.status_code == 202, resp.content
    op = drive(resp.json()["operation"]["id"])
    assert op.status == "succeeded", (op.error_code, op.error_detail)
    return op


def _volume(world, ssd, inst, name: str, **extra) -> str:
    resp = world.client_a.post(
        "/api/v1/volumes/",
        {
            "project": str(world.project_a.pk),
            "name": name,
            "size_gib": 1,
            "volume_type": str(ssd.pk),
            **extra,
        },
        format="json",
    )
    _ok(resp)
    vol_id = resp.json()["volume"]["id"]
    _ok(world.client_a.post(f"/api/v1/volumes/{vol_id}/attach/", {"instance": str(inst.pk)}, format="json"))
    return vol_id


def test_a_resize_redefines_the_domain_with_its_attached_volumes(world, stack):
    from apps.compute.models import Flavor

    host, inst, ssd = stack
    vol_id = _volume(world, ssd, inst, "data")
    url = f"/api/v1/instances/{inst.pk}"
    _ok(world.client_a.post(f"{url}/stop/", {"hard": True}, format="json"))
    bigger = Flavor.objects.create(
        name="g1-big", vcpus=12, memory_mib=98304, gpu_form="gpu", gpu_model="H100-SXM5-80GB", gpu_count=1
    )
    _ok(world.client_a.post(f"{url}/resize/", {"flavor": str(bigger.pk)}, format="json"))
    spec = driver_for_host(host).host.specs[inst.pk]
    vol = Volume.objects.get(pk=vol_id)
    assert (spec.vcpus, [(d.target_dev, d.serial, d.path) for d in spec.volumes]) == (
        12,
        [("vdb", disk_serial(vol_id), vol.backend_path)],
    )
    _ok(world.client_a.post(f"{url}/start/", {}, format="json"))
    assert Instance.objects.get(pk=inst.pk).status == "active"


def test_the_delete_workflow_releases_the_volumes_and_deletes_delete_on_termination_ones(world, stack):
    _host, inst, ssd = stack
    keep = _volume(world, ssd, inst, "keep")
    scratch = _volume(world, ssd, inst, "scratch", delete_on_termination=True)
    resp = world.client_a.delete(f"/api/v1/instances/{inst.pk}/")
    assert resp.status_code == 202, resp.content
    op = drive(resp.json()["operation"]["id"])
    assert (op.status, "release_volumes" in op.steps_done) == ("succeeded", True)
    # no beat ran: the delete workflow itself released the attachments and started the volume's delete
    assert (
        VolumeAttachment.objects.count(),
        Volume.objects.get(pk=keep).status,
        Volume.objects.get(pk=scratch).status,
    ) == (0, "available", "deleting")
    (vop,) = Operation.objects.filter(target_id=scratch, kind="volume.delete")
    assert drive(vop.pk).status == "succeeded"
    assert Volume.objects.get(pk=scratch).status == "deleted"
