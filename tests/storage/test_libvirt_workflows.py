"""The storage workflows through the API on real libvirt: a private unprivileged libvirtd with a `dir` pool and a
QEMU (TCG) guest (`libvirt_daemon`), the same steps the fake runs in test_lifecycle.py."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from apps.compute.drivers.base import DomainSpec, PowerState
from apps.compute.drivers.libvirt import LibvirtDriver
from apps.compute.models import Instance
from apps.storage.drivers import forget_drivers, get_driver
from apps.storage.drivers.base import GIB, disk_serial
from apps.storage.models import Volume, VolumeType

from .conftest import drive, instance, volume_body
from .libvirt_daemon import QEMU, libvirt_session  # noqa: F401  (session fixture)

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


@pytest.fixture
def real(settings, monkeypatch, libvirt_session):  # noqa: F811
    uri, root = libvirt_session
    settings.DRIVERS = {**getattr(settings, "DRIVERS", {}),
                        "storage": "apps.storage.drivers.libvirt:LibvirtStorageDriver",
                        "compute": "apps.compute.drivers.libvirt:LibvirtDriver"}
    monkeypatch.setenv("STORAGE_SHARED_POOL_URI", uri)
    forget_drivers()
    name = f"wf-{uuid.uuid4().hex[:8]}"
    yield uri, name, str(Path(root, "pools", name))
    from apps.compute.drivers.libvirt.connection import get_connection

    conn = get_connection(uri)
    for dom in conn.listAllDomains(0):
        if dom.isActive():
            dom.destroy()
        dom.undefine()
    pool = conn.storagePoolLookupByName(name)
    if not pool.isActive():  # a test that stopped it failed before it was started again
        pool.create(0)
    for vol in pool.listAllVolumes(0):
        vol.delete(0)
    pool.destroy()
    pool.undefine()
    forget_drivers()


def _ok(resp) -> None:
    assert resp.status_code == 202, resp.content
    op = drive(resp.json()["operation"]["id"])
    assert op.status == "succeeded", (op.error_code, op.error_detail)


def test_volume_lifecycle_on_libvirt(world, real):
    uri, pool, target = real
    VolumeType.objects.filter(pk=world.ssd.pk).update(pool=pool, pool_target_path=target)
    host = world.instance_a.host
    host.libvirt_uri = uri
    host.save(update_fields=["libvirt_uri"])
    inst = instance(world.project_a, "vm-qemu", status="active", host=host)
    compute = LibvirtDriver(uri, seed_dir=str(Path(target).parent.parent / "seeds"))
    compute.domain_define(DomainSpec(uuid=inst.pk, vcpus=1, memory_mib=64, project_id="p", machine="pc", uefi=False,
                                     virt_type="qemu", emulator=QEMU))
    assert compute.domain_start(inst.pk).power_state == PowerState.RUNNING

    created = world.client_a.post("/api/v1/volumes/", volume_body(world, "data", 1), format="json")
    _ok(created)
    vol = Volume.objects.get(pk=created.json()["volume"]["id"])
    drv = get_driver(uri)
    assert (vol.status, drv.volume_get(pool, str(vol.pk)).capacity_bytes) == ("available", GIB)

    _ok(world.client_a.post(f"/api/v1/volumes/{vol.pk}/attach/", {"instance": str(inst.pk)}, format="json"))
    assert [(d.target_dev, d.serial) for d in drv.attached_disks(str(inst.pk)) if d.target_dev == "vdb"] == [
        ("vdb", disk_serial(vol.pk))]  # hot-plugged into the running guest

    compute.domain_stop(inst.pk, hard=True)
    Instance.objects.filter(pk=inst.pk).update(status="stopped")
    _ok(world.client_a.post(f"/api/v1/volumes/{vol.pk}/detach/", {"instance": str(inst.pk)}, format="json"))
    assert [d.target_dev for d in drv.attached_disks(str(inst.pk)) if d.target_dev == "vdb"] == []

    _ok(world.client_a.post(f"/api/v1/volumes/{vol.pk}/extend/", {"size_gib": 2}, format="json"))
    assert drv.volume_get(pool, str(vol.pk)).capacity_bytes == 2 * GIB
    snap = world.client_a.post("/api/v1/snapshots/", {"volume": str(vol.pk), "name": "s1"}, format="json")
    _ok(snap)
    restored = world.client_a.post("/api/v1/volumes/", {"project": str(world.project_a.pk), "name": "copy",
                                                        "source_snapshot": snap.json()["snapshot"]["id"]},
                                   format="json")
    _ok(restored)
    assert drv.volume_get(pool, restored.json()["volume"]["id"]).capacity_bytes == 2 * GIB
    _ok(world.client_a.delete(f"/api/v1/volumes/{vol.pk}/"))
    with pytest.raises(Exception) as exc:
        drv.volume_get(pool, str(vol.pk))
    assert exc.value.code == "volume_not_found"


def test_a_redefined_domain_keeps_its_attached_volume_on_libvirt(world, real):
    """Attach → stop → redefine (what a resize does, with the spec compute builds: `instance_volume_disks`) →
    start: the disk is in the persistent and the live XML, as storage's driver attached it."""
    from dataclasses import replace

    from apps.compute.services.volumes import instance_volume_disks

    uri, pool, target = real
    VolumeType.objects.filter(pk=world.ssd.pk).update(pool=pool, pool_target_path=target)
    host = world.instance_a.host
    host.libvirt_uri = uri
    host.save(update_fields=["libvirt_uri"])
    inst = instance(world.project_a, "vm-redefine", status="active", host=host)
    compute = LibvirtDriver(uri, seed_dir=str(Path(target).parent.parent / "seeds"))
    spec = DomainSpec(uuid=inst.pk, vcpus=1, memory_mib=64, project_id="p", machine="pc", uefi=False,
                      virt_type="qemu", emulator=QEMU)
    compute.domain_define(spec)
    compute.domain_start(inst.pk)
    created = world.client_a.post("/api/v1/volumes/", volume_body(world, "data", 1), format="json")
    _ok(created)
    vol_id = created.json()["volume"]["id"]
    _ok(world.client_a.post(f"/api/v1/volumes/{vol_id}/attach/", {"instance": str(inst.pk)}, format="json"))
    compute.domain_stop(inst.pk, hard=True)

    drv = get_driver(uri)
    compute.domain_define(replace(spec, memory_mib=128))  # without the volumes, as before: the disk is gone
    assert [d.target_dev for d in drv.attached_disks(str(inst.pk))] == []
    compute.domain_define(replace(spec, memory_mib=128, volumes=instance_volume_disks(inst)))
    assert compute.domain_start(inst.pk).power_state == PowerState.RUNNING
    disk = [(d.target_dev, d.serial, d.format) for d in drv.attached_disks(str(inst.pk))]
    assert disk == [("vdb", disk_serial(vol_id), "qcow2")]
    assert f"<serial>{disk_serial(vol_id)}</serial>" in compute.domain_xml_get(inst.pk)
    compute.domain_stop(inst.pk, hard=True)  # a stop/start keeps it too
    compute.domain_start(inst.pk)
    assert [d.target_dev for d in drv.attached_disks(str(inst.pk))] == ["vdb"]


def test_a_domain_boots_from_a_volume_on_libvirt(world, real):
    """Boot from volume: the domain compute defines for a boot volume (no image disk, the volume as ``vda`` with
    `<boot order='1'/>`, no `<os><boot>`) is one libvirt accepts and starts, and keeps across a stop/start."""
    import xml.etree.ElementTree as ET

    from apps.compute.drivers.base import VolumeDisk
    from apps.storage.drivers.base import VolumeSpec
    from apps.storage.services.backend import pool_spec

    uri, pool, target = real
    VolumeType.objects.filter(pk=world.ssd.pk).update(pool=pool, pool_target_path=target)
    world.ssd.refresh_from_db()
    drv = get_driver(uri)
    drv.pool_ensure(pool_spec(world.ssd))
    key = str(uuid.uuid4())
    info = drv.volume_create(VolumeSpec(key=key, pool=pool, size_gib=1))
    compute = LibvirtDriver(uri, seed_dir=str(Path(target).parent.parent / "seeds"))
    dom = uuid.uuid4()
    disk = VolumeDisk(path=info.path, target_dev="vda", serial=disk_serial(key), format=info.format,
                      cache=getattr(drv, "disk_cache", "none"), boot=True)
    compute.domain_define(DomainSpec(uuid=dom, vcpus=1, memory_mib=64, project_id="p", machine="pc", uefi=False,
                                     virt_type="qemu", emulator=QEMU, volumes=(disk,)))
    assert compute.domain_start(dom).power_state == PowerState.RUNNING
    root = ET.fromstring(compute.domain_xml_get(dom))
    assert root.find("os/boot") is None
    disks = [(d.find("target").get("dev"), d.find("boot").get("order") if d.find("boot") is not None else None,
              d.find("serial").text) for d in root.findall("devices/disk")]
    assert disks == [("vda", "1", disk_serial(key))]
    compute.domain_stop(dom, hard=True)
    assert compute.domain_start(dom).power_state == PowerState.RUNNING
    assert [d.target_dev for d in drv.attached_disks(str(dom))] == ["vda"]


def test_volumes_survive_a_host_repair_on_libvirt(world, real):
    """docs/storage.md, "Host repair": staff mark the host faulty, it is repaired (its guest powered off, its
    storage pool not running when it comes back) and marked available again. The volume rows, their attachments
    and the pool volumes with their bytes are as they were, and a host-local volume attaches again (the attach
    starts the pool)."""
    from apps.compute.drivers.libvirt.connection import get_connection

    from .test_driver_libvirt import _real_holds, _real_write

    uri, pool, target = real
    VolumeType.objects.filter(pk=world.local.pk).update(pool=pool, pool_target_path=target)
    host = world.instance_a.host
    host.libvirt_uri = uri
    host.save(update_fields=["libvirt_uri"])
    inst = instance(world.project_a, "vm-repair", status="active", host=host)
    compute = LibvirtDriver(uri, seed_dir=str(Path(target).parent.parent / "seeds"))
    compute.domain_define(DomainSpec(uuid=inst.pk, vcpus=1, memory_mib=64, project_id="p", machine="pc", uefi=False,
                                     virt_type="qemu", emulator=QEMU))
    assert compute.domain_start(inst.pk).power_state == PowerState.RUNNING
    ids = {}
    for name in ("data", "spare"):
        created = world.client_a.post("/api/v1/volumes/", {**volume_body(world, name, 1), "instance": str(inst.pk),
                                                           "volume_type": str(world.local.pk)}, format="json")
        _ok(created)
        ids[name] = created.json()["volume"]["id"]
    drv = get_driver(uri)
    data = drv.volume_get(pool, ids["data"])
    _real_write(data.path, "qcow2", 4096, 65536, 0x3C)
    _ok(world.client_a.post(f"/api/v1/volumes/{ids['data']}/attach/", {"instance": str(inst.pk)}, format="json"))

    def seen() -> list:
        return sorted((v["name"], v["status"], v["size_gib"], v["zone"],
                       [(a["instance"], a["device"], a["status"]) for a in v["attachments"]])
                      for v in world.client_a.get("/api/v1/volumes/").json()["results"])

    before = seen()
    assert [(n, s, a) for n, s, _size, _host, a in before] == [
        ("data", "in-use", [(str(inst.pk), "vdb", "attached")]), ("spare", "available", [])]
    url = f"/api/v1/hosts/{host.pk}"
    assert world.staff_client.post(f"{url}/mark-faulty/", {"reason": "PSU"}, format="json").status_code == 200
    compute.domain_stop(inst.pk, hard=True)  # the repair: the host goes down, and comes back without its pool
    get_connection(uri).storagePoolLookupByName(pool).destroy()
    assert world.staff_client.post(f"{url}/mark-available/", {"reason": "PSU replaced"},
                                   format="json").status_code == 200
    assert seen() == before
    assert compute.domain_start(inst.pk).power_state == PowerState.RUNNING  # the tenant starts the VM again

    _ok(world.client_a.post(f"/api/v1/volumes/{ids['spare']}/attach/", {"instance": str(inst.pk)}, format="json"))
    assert {(d.target_dev, d.serial) for d in drv.attached_disks(str(inst.pk))} >= {
        ("vdb", disk_serial(ids["data"])), ("vdc", disk_serial(ids["spare"]))}
    assert [(v[0], v[1]) for v in seen()] == [("data", "in-use"), ("spare", "in-use")]
    again = drv.volume_get(pool, ids["data"])
    assert (again.path, again.capacity_bytes, again.format) == (data.path, GIB, "qcow2")
    compute.domain_stop(inst.pk, hard=True)
    assert _real_holds(data.path, "qcow2", 4096, 65536, 0x3C)
