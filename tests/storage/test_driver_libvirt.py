"""The storage driver contract: one suite, run on the fake and on a real libvirt daemon (see libvirt_daemon.py).

On `libvirt` the pools are real `dir` pools in a temp dir, volumes real qcow2/raw files made by qemu-img, and
the guest a real QEMU (TCG, SeaBIOS, no OS): disks are hot-plugged into it and its live XML is read back.
Those tests are marked slow (a QEMU start, and a virtio hot-unplug that libvirt waits 5 s for), and so is the
raw-format snapshot round trip (libvirt copies raw files byte by byte).
"""
from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from apps.compute.drivers.base import ComputeDriver, DomainSpec, PowerState
from apps.compute.drivers.fake import FakeDriver
from apps.compute.drivers.libvirt import LibvirtDriver
from apps.core.drivers import DriverConflict, DriverError, DriverNotFound, DriverTransientError
from apps.storage.drivers.base import GIB, DiskAttachment, PoolSpec, StorageDriver, VolumeSpec, disk_serial
from apps.storage.drivers.fake import FakeStorageDriver
from apps.storage.drivers.libvirt import LibvirtStorageDriver

from .libvirt_daemon import QEMU, libvirt_session  # noqa: F401  (session fixture)

MIB = 1024**2


@dataclass
class Backend:
    name: str
    driver: StorageDriver
    pool: PoolSpec
    unreachable: StorageDriver
    compute: ComputeDriver
    write: Callable[[str, str, int, int, int], None]  # (path, format, offset, length, byte)
    holds: Callable[[str, str, int, int, int], bool]  # the same range reads back as `byte`
    keep_disks: Callable[[uuid.UUID], None]  # the guest will ignore virtio hot-unplug requests


def _qemu_io(path: str, fmt: str, cmd: str) -> str:
    out = subprocess.run(["qemu-io", "-f", fmt, "-c", cmd, path], capture_output=True, text=True)
    if out.returncode and "Pattern verification failed" not in out.stdout + out.stderr:
        raise subprocess.CalledProcessError(out.returncode, out.args, out.stdout, out.stderr)
    return out.stdout + out.stderr


def _real_write(path: str, fmt: str, offset: int, length: int, byte: int) -> None:
    if fmt == "raw":
        with open(path, "r+b") as fh:
            fh.seek(offset)
            fh.write(bytes([byte]) * length)
    else:  # through the qcow2 layer, as a guest would write
        _qemu_io(path, fmt, f"write -P {byte:#x} {offset} {length}")


def _real_holds(path: str, fmt: str, offset: int, length: int, byte: int) -> bool:
    if fmt == "raw":
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read(length) == bytes([byte]) * length
    return "Pattern verification failed" not in _qemu_io(path, fmt, f"read -P {byte:#x} {offset} {length}")


def _fake_backend() -> Backend:
    uri = "fake://storage-host"
    FakeStorageDriver.reset()
    FakeDriver.reset()
    FakeStorageDriver.unreachable.add("fake://down")
    drv = FakeStorageDriver(uri)
    pool = PoolSpec(name=f"p-{uuid.uuid4().hex[:8]}", kind="dir", target_path="/var/lib/gpucloud/pools/local")
    return Backend("fake", drv, pool, FakeStorageDriver("fake://down"), FakeDriver(uri),
                   lambda path, _f, off, n, b: drv.write_bytes(path, off, bytes([b]) * n),
                   lambda path, _f, off, n, b: drv.read_bytes(path, off, n) == bytes([b]) * n,
                   lambda dom: FakeStorageDriver.guest_keeps_disks.add(str(dom)))


def _libvirt_backend(request) -> Backend:
    uri, root = request.getfixturevalue("libvirt_session")
    name = f"p-{uuid.uuid4().hex[:8]}"
    pool = PoolSpec(name=name, kind="dir", target_path=str(Path(root, "pools", name)))
    return Backend("libvirt", LibvirtStorageDriver(uri), pool,
                   LibvirtStorageDriver("qemu+tcp://127.0.0.1:1/system", timeout=3),
                   LibvirtDriver(uri, seed_dir=str(Path(root, "seeds"))), _real_write, _real_holds,
                   lambda dom: None)  # SeaBIOS has no OS: it never releases a virtio disk


def _cleanup(b: Backend) -> None:
    if b.name == "libvirt":
        from apps.compute.drivers.libvirt.connection import get_connection

        conn = get_connection(b.driver.uri)
        for dom in conn.listAllDomains(0):
            if dom.isActive():
                dom.destroy()
            dom.undefine()
        pool = conn.storagePoolLookupByName(b.pool.name)
        for vol in pool.listAllVolumes(0):
            vol.delete(0)
        pool.destroy()
        pool.undefine()
    FakeStorageDriver.reset()
    FakeDriver.reset()


@pytest.fixture(params=["fake", "libvirt"])
def backend(request) -> Backend:
    b = _fake_backend() if request.param == "fake" else _libvirt_backend(request)
    b.driver.pool_ensure(b.pool)
    yield b
    _cleanup(b)


@pytest.fixture(params=["fake", pytest.param("libvirt", marks=pytest.mark.slow)])
def guest_backend(request) -> Backend:
    """A backend whose tests boot a guest (QEMU on libvirt)."""
    b = _fake_backend() if request.param == "fake" else _libvirt_backend(request)
    b.driver.pool_ensure(b.pool)
    yield b
    _cleanup(b)


def _key() -> str:
    return str(uuid.uuid4())


def _vol(b: Backend, size_gib: int = 1, fmt: str = "qcow2", **kw) -> VolumeSpec:
    return VolumeSpec(key=_key(), pool=b.pool.name, size_gib=size_gib, format=fmt, **kw)


def _guest(b: Backend, *, running: bool) -> uuid.UUID:
    spec = DomainSpec(uuid=uuid.uuid4(), vcpus=1, memory_mib=64, project_id="p-storage", machine="pc",
                      uefi=False, virt_type="qemu", emulator=QEMU)
    b.compute.domain_define(spec)
    if running:
        assert b.compute.domain_start(spec.uuid).power_state == PowerState.RUNNING
    return spec.uuid


# -- pools and volumes ------------------------------------------------------------------------------------
def test_pool_ensure_is_idempotent_and_refuses_another_definition(backend):
    backend.driver.pool_ensure(backend.pool)  # already defined, built, started: nothing to do
    other = PoolSpec(name=backend.pool.name, kind="dir", target_path=backend.pool.target_path + "-elsewhere")
    with pytest.raises(DriverConflict) as exc:
        backend.driver.pool_ensure(other)
    assert exc.value.code == "pool_definition_mismatch"
    with pytest.raises(DriverError) as exc:
        backend.driver.pool_ensure(PoolSpec(name="p-zfs", kind="zfs", target_path="/tank"))
    assert exc.value.code == "invalid_pool_spec"


def test_volume_create_is_idempotent_by_key(backend):
    spec = _vol(backend)
    first = backend.driver.volume_create(spec)
    assert (first.key, first.pool, first.capacity_bytes, first.format) == (spec.key, spec.pool, GIB, "qcow2")
    assert first.path == f"{backend.pool.target_path}/{spec.key}"
    assert backend.driver.volume_create(spec) == first
    assert backend.driver.volume_get(spec.pool, spec.key) == first
    with pytest.raises(DriverConflict) as exc:
        backend.driver.volume_create(VolumeSpec(key=spec.key, pool=spec.pool, size_gib=2))
    assert exc.value.code == "volume_size_mismatch"
    raw = backend.driver.volume_create(_vol(backend, fmt="raw"))
    assert (raw.format, raw.capacity_bytes) == ("raw", GIB)


def test_resize_grows_and_refuses_to_shrink(backend):
    spec = _vol(backend)
    backend.driver.volume_create(spec)
    assert backend.driver.volume_resize(spec.pool, spec.key, 3).capacity_bytes == 3 * GIB
    assert backend.driver.volume_resize(spec.pool, spec.key, 3).capacity_bytes == 3 * GIB  # no-op
    with pytest.raises(DriverError) as exc:
        backend.driver.volume_resize(spec.pool, spec.key, 2)
    assert exc.value.code == "volume_shrink_refused"
    assert backend.driver.volume_get(spec.pool, spec.key).capacity_bytes == 3 * GIB


def test_delete_is_idempotent(backend):
    spec = _vol(backend)
    backend.driver.volume_create(spec)
    backend.driver.volume_delete(spec.pool, spec.key)
    backend.driver.volume_delete(spec.pool, spec.key)  # missing: no-op
    backend.driver.volume_delete("no-such-pool", spec.key)
    with pytest.raises(DriverNotFound) as exc:
        backend.driver.volume_get(spec.pool, spec.key)
    assert exc.value.code == "volume_not_found"


def test_missing_pool_volume_and_snapshot(backend):
    with pytest.raises(DriverNotFound) as exc:
        backend.driver.volume_get("no-such-pool", _key())
    assert exc.value.code == "pool_not_found"
    with pytest.raises(DriverNotFound) as exc:
        backend.driver.volume_create(VolumeSpec(key=_key(), pool="no-such-pool", size_gib=1))
    assert exc.value.code == "pool_not_found"
    with pytest.raises(DriverNotFound) as exc:
        backend.driver.snapshot_create(backend.pool.name, _key(), _key())
    assert exc.value.code == "volume_not_found"
    with pytest.raises(DriverNotFound) as exc:
        backend.driver.volume_from_snapshot(backend.pool.name, _key(), _vol(backend))
    assert exc.value.code == "snapshot_not_found"


@pytest.mark.parametrize("spec_kw", [dict(size_gib=0), dict(fmt="vmdk"), dict(fmt="raw", backing="/images/u.qcow2")])
def test_bad_volume_specs_are_refused(backend, spec_kw):
    with pytest.raises(DriverError) as exc:
        backend.driver.volume_create(_vol(backend, **spec_kw))
    assert exc.value.code == "invalid_volume_spec"


def test_unreachable_host_is_transient(backend):
    with pytest.raises(DriverTransientError) as exc:
        backend.unreachable.volume_get("any", _key())
    assert exc.value.code == "host_unreachable"


# -- snapshots ----------------------------------------------------------------------------------------
# raw → raw copies are libvirt's own read-everything copy (about 6 s per GiB on the CI machine): slow.
@pytest.mark.parametrize("fmt", ["qcow2", pytest.param("raw", marks=pytest.mark.slow)])
def test_snapshot_and_restore_keep_the_bytes(backend, fmt):
    spec = _vol(backend, fmt=fmt)
    vol = backend.driver.volume_create(spec)
    backend.write(vol.path, fmt, 1 * MIB, 64 * 1024, 0x5A)
    snap_key = _key()
    snap = backend.driver.snapshot_create(spec.pool, spec.key, snap_key)
    assert (snap.key, snap.volume_key, snap.pool, snap.size_bytes) == (snap_key, spec.key, spec.pool, GIB)
    assert snap.path == f"{backend.pool.target_path}/{snap_key}" and snap.path != vol.path
    assert backend.driver.snapshot_create(spec.pool, spec.key, snap_key) == snap  # idempotent
    backend.write(vol.path, fmt, 1 * MIB, 64 * 1024, 0xC3)  # the volume moves on; the snapshot does not

    restored = backend.driver.volume_from_snapshot(spec.pool, snap_key, _vol(backend, size_gib=2, fmt=fmt))
    assert (restored.capacity_bytes, restored.format) == (2 * GIB, fmt)
    assert backend.holds(restored.path, fmt, 1 * MIB, 64 * 1024, 0x5A)
    assert backend.holds(vol.path, fmt, 1 * MIB, 64 * 1024, 0xC3)

    backend.driver.volume_delete(spec.pool, spec.key)  # a snapshot outlives its volume (a full copy)
    again = backend.driver.volume_from_snapshot(spec.pool, snap_key, _vol(backend, fmt=fmt))
    assert again.capacity_bytes == GIB
    assert backend.holds(again.path, fmt, 1 * MIB, 64 * 1024, 0x5A)
    backend.driver.snapshot_delete(spec.pool, snap_key)
    backend.driver.snapshot_delete(spec.pool, snap_key)  # missing: no-op
    assert backend.holds(again.path, fmt, 1 * MIB, 64 * 1024, 0x5A)  # restores outlive their snapshot


def test_restore_into_a_smaller_volume_is_refused(backend):
    spec = _vol(backend, size_gib=2)
    backend.driver.volume_create(spec)
    snap = backend.driver.snapshot_create(spec.pool, spec.key, _key())
    with pytest.raises(DriverError) as exc:
        backend.driver.volume_from_snapshot(spec.pool, snap.key, _vol(backend, size_gib=1))
    assert exc.value.code == "volume_shrink_refused"


def test_volume_from_an_image_reads_the_image(backend):
    image = backend.driver.volume_create(_vol(backend))
    backend.write(image.path, "qcow2", 0, 4096, 0x11)
    vol = backend.driver.volume_create(_vol(backend, size_gib=2, backing=image.path))
    assert (vol.capacity_bytes, vol.format) == (2 * GIB, "qcow2")
    assert backend.holds(vol.path, "qcow2", 0, 4096, 0x11)


# -- disks on a guest -----------------------------------------------------------------------------------
def test_attach_and_detach_on_a_running_guest(guest_backend):
    b = guest_backend
    drv = b.driver
    dom = _guest(b, running=True)
    vol = drv.volume_create(_vol(b))
    att = DiskAttachment(volume_path=vol.path, target_dev="vdb", serial=disk_serial(vol.key))
    drv.disk_attach(str(dom), att, live=True)
    drv.disk_attach(str(dom), att, live=True)  # already there: no-op
    assert [d for d in drv.attached_disks(str(dom)) if d.target_dev == "vdb"] == [
        DiskAttachment(vol.path, "vdb", "virtio", disk_serial(vol.key), False, "qcow2")]

    other = drv.volume_create(_vol(b))
    with pytest.raises(DriverConflict) as exc:
        drv.disk_attach(str(dom), DiskAttachment(other.path, "vdb"), live=True)
    assert exc.value.code == "disk_target_taken"
    with pytest.raises(DriverConflict) as exc:
        drv.disk_attach(str(dom), DiskAttachment(vol.path, "vdc"), live=True)
    assert exc.value.code == "volume_already_attached"
    with pytest.raises(DriverConflict) as exc:  # the running guest holds the image
        drv.snapshot_create(b.pool.name, vol.key, _key())
    assert exc.value.code == "volume_in_use"
    with pytest.raises(DriverConflict) as exc:
        drv.volume_resize(b.pool.name, vol.key, 2)
    assert exc.value.code == "volume_in_use"
    drv.disk_resize(str(dom), "vdb", 2)  # through the guest's QEMU instead
    drv.disk_resize(str(dom), "vdb", 2)  # the same size: no-op
    assert drv.volume_get(b.pool.name, vol.key).capacity_bytes == 2 * GIB
    with pytest.raises(DriverError) as exc:
        drv.disk_resize(str(dom), "vdb", 1)
    assert exc.value.code == "volume_shrink_refused"
    with pytest.raises(DriverNotFound) as exc:
        drv.disk_resize(str(dom), "vdq", 3)
    assert exc.value.code == "disk_not_found"

    # SCSI: QEMU unplugs the disk from the bus without the guest
    drv.disk_attach(str(dom), DiskAttachment(other.path, "sdb", bus="scsi", read_only=True), live=True)
    assert ("sdb", "scsi", True) in {(d.target_dev, d.bus, d.read_only) for d in drv.attached_disks(str(dom))}
    drv.disk_detach(str(dom), "sdb", live=True)
    assert "sdb" not in {d.target_dev for d in drv.attached_disks(str(dom))}

    # virtio-blk: ACPI hot-unplug needs the guest's OS to release the device, and this one has none
    b.keep_disks(dom)
    with pytest.raises(DriverTransientError) as exc:
        drv.disk_detach(str(dom), "vdb", live=True)
    assert exc.value.code == "disk_detach_pending"
    assert "vdb" in {d.target_dev for d in drv.attached_disks(str(dom))}  # still in the running guest
    b.compute.domain_stop(dom, hard=True)
    assert "vdb" not in {d.target_dev for d in drv.attached_disks(str(dom))}  # gone from its definition
    drv.disk_detach(str(dom), "vdb", live=True)  # missing: no-op


def test_attach_to_a_stopped_guest_takes_effect_at_boot(guest_backend):
    b = guest_backend
    drv = b.driver
    dom = _guest(b, running=False)
    vol = drv.volume_create(_vol(b, fmt="raw"))
    drv.disk_attach(str(dom), DiskAttachment(vol.path, "vdc", serial="vol-1"), live=True)
    assert [(d.target_dev, d.format, d.serial) for d in drv.attached_disks(str(dom))] == [("vdc", "raw", "vol-1")]
    b.compute.domain_start(dom)
    assert [d.target_dev for d in drv.attached_disks(str(dom))] == ["vdc"]  # the guest booted with it
    drv.disk_detach(str(dom), "vdc", live=False)  # the definition only: the running guest keeps it
    assert [d.target_dev for d in drv.attached_disks(str(dom))] == ["vdc"]
    b.compute.domain_stop(dom, hard=True)
    assert drv.attached_disks(str(dom)) == []


def test_disk_errors(guest_backend):
    drv = guest_backend.driver
    dom = _guest(guest_backend, running=False)
    vol = drv.volume_create(_vol(guest_backend))
    with pytest.raises(DriverNotFound) as exc:
        drv.disk_attach(str(uuid.uuid4()), DiskAttachment(vol.path, "vdb"), live=True)
    assert exc.value.code == "domain_not_found"
    with pytest.raises(DriverNotFound) as exc:
        drv.disk_attach(str(dom), DiskAttachment(guest_backend.pool.target_path + "/nothing", "vdb"), live=True)
    assert exc.value.code == "volume_not_found"
    with pytest.raises(DriverError) as exc:
        drv.disk_attach(str(dom), DiskAttachment(vol.path, "sdb", bus="virtio"), live=True)
    assert exc.value.code == "invalid_disk_attachment"
    drv.disk_detach(str(dom), "vdz", live=True)  # missing: no-op
    with pytest.raises(DriverConflict) as exc:
        drv.disk_resize(str(dom), "vdb", 2)
    assert exc.value.code == "domain_not_running"


def test_a_volume_keeps_its_bytes_across_detach_attach_and_domain_delete(guest_backend):
    """What a tenant relies on when a volume outlives its instance: the bytes written into the pool volume
    (through the qcow2 layer by qemu-io on libvirt, as a guest would) are there after the volume was
    hot-plugged into a running guest, detached (the guest stopped: a virtio disk leaves a running guest only
    when its OS lets go, and this one has none), attached again to the running guest and after the guest's
    domain was deleted while it held the disk."""
    b = guest_backend
    drv = b.driver
    vol = drv.volume_create(_vol(b, size_gib=1))
    head, tail = (1 * MIB, 64 * 1024, 0x5A), (GIB - 64 * 1024, 64 * 1024, 0xA7)
    for offset, length, byte in (head, tail):
        b.write(vol.path, "qcow2", offset, length, byte)
    att = DiskAttachment(volume_path=vol.path, target_dev="vdb", serial=disk_serial(vol.key))
    dom = _guest(b, running=True)

    drv.disk_attach(str(dom), att, live=True)
    assert "vdb" in {d.target_dev for d in drv.attached_disks(str(dom))}  # in the running guest's live XML
    b.compute.domain_stop(dom, hard=True)
    drv.disk_detach(str(dom), "vdb", live=True)
    assert drv.attached_disks(str(dom)) == []
    assert all(b.holds(vol.path, "qcow2", *region) for region in (head, tail))

    assert b.compute.domain_start(dom).power_state == PowerState.RUNNING
    drv.disk_attach(str(dom), att, live=True)
    assert [(d.target_dev, d.serial) for d in drv.attached_disks(str(dom))] == [("vdb", disk_serial(vol.key))]
    b.compute.domain_delete(dom)  # the instance's delete: power off and undefine, the guest holding the disk
    with pytest.raises(DriverNotFound):
        b.compute.domain_get(dom)

    info = drv.volume_get(b.pool.name, vol.key)
    assert (info.path, info.capacity_bytes, info.format) == (vol.path, GIB, "qcow2")
    assert all(b.holds(vol.path, "qcow2", *region) for region in (head, tail))
    assert not b.holds(vol.path, "qcow2", head[0], head[1], tail[2])  # the check tells the patterns apart
