"""The libvirt storage driver on libvirt's test driver (`test:///default`: the demo fleet, the e2e stack, the
benchmarks).

That driver has pools and volumes but no device attach or detach and no volume resize (`VIR_ERR_NO_SUPPORT`), so
the storage driver redefines the domain with the disk and power-cycles a running one, and makes a grown volume
again; these tests read the disk back from the live and the persistent XML. Real hot-plug into a QEMU guest is
test_driver_libvirt.py's."""
from __future__ import annotations

import uuid

import pytest

from apps.compute.drivers.base import DomainSpec, PowerState
from apps.compute.drivers.libvirt import LibvirtDriver
from apps.storage.drivers.base import GIB, DiskAttachment, PoolSpec, VolumeSpec, disk_serial
from apps.storage.drivers.libvirt import LibvirtStorageDriver

URI = "test:///default"


@pytest.fixture
def setup(tmp_path):
    compute = LibvirtDriver(URI, seed_dir=str(tmp_path / "seeds"))
    drv = LibvirtStorageDriver(URI)
    pool = PoolSpec(name=f"t-{uuid.uuid4().hex[:8]}", kind="dir", target_path=f"/t-pools/{uuid.uuid4().hex[:8]}")
    drv.pool_ensure(pool)
    domains = []

    def guest(running: bool) -> str:
        spec = DomainSpec(uuid=uuid.uuid4(), vcpus=1, memory_mib=64, uefi=False)
        compute.domain_define(spec)
        if running:
            assert compute.domain_start(spec.uuid).power_state == PowerState.RUNNING
        domains.append(spec.uuid)
        return str(spec.uuid)

    yield drv, pool, guest, compute
    for dom in domains:
        compute.domain_delete(dom)


def _disk(drv, pool, dev: str) -> DiskAttachment:
    vol = drv.volume_create(VolumeSpec(key=str(uuid.uuid4()), pool=pool.name, size_gib=1))
    return DiskAttachment(volume_path=vol.path, target_dev=dev, serial=disk_serial(vol.key))


def test_attach_and_detach_on_a_running_test_domain(setup):
    drv, pool, guest, compute = setup
    dom = guest(running=True)
    att = _disk(drv, pool, "vdb")
    drv.disk_attach(dom, att, live=True)
    drv.disk_attach(dom, att, live=True)  # already there: no-op, not a second disk
    assert [(d.target_dev, d.serial) for d in drv.attached_disks(dom) if d.target_dev == "vdb"] == [
        ("vdb", att.serial)]
    assert compute.domain_get(uuid.UUID(dom)).power_state == PowerState.RUNNING
    drv.disk_attach(dom, _disk(drv, pool, "vdc"), live=True)
    drv.disk_detach(dom, "vdb", live=True)
    assert [d.target_dev for d in drv.attached_disks(dom) if d.target_dev.startswith("vd")
            and d.target_dev != "vda"] == ["vdc"]
    drv.disk_detach(dom, "vdb", live=True)  # missing: no-op


def test_attach_to_a_stopped_test_domain_changes_its_definition(setup):
    drv, pool, guest, compute = setup
    dom = guest(running=False)
    drv.disk_attach(dom, _disk(drv, pool, "vdd"), live=True)
    assert "vdd" in {d.target_dev for d in drv.attached_disks(dom)}
    assert compute.domain_get(uuid.UUID(dom)).power_state != PowerState.RUNNING
    drv.disk_detach(dom, "vdd", live=False)
    assert "vdd" not in {d.target_dev for d in drv.attached_disks(dom)}


def test_resize_snapshot_and_restore_on_the_test_driver(setup):
    drv, pool, _guest, _compute = setup
    vol = drv.volume_create(VolumeSpec(key=str(uuid.uuid4()), pool=pool.name, size_gib=1))
    grown = drv.volume_resize(pool.name, vol.key, 3)  # no virStorageVolResize there: made again, larger
    assert (grown.capacity_bytes, grown.path, grown.format) == (3 * GIB, vol.path, vol.format)
    snap = drv.snapshot_create(pool.name, vol.key, str(uuid.uuid4()))
    restored = drv.volume_from_snapshot(pool.name, snap.key, VolumeSpec(key=str(uuid.uuid4()), pool=pool.name,
                                                                        size_gib=4))
    assert (snap.size_bytes, restored.capacity_bytes) == (3 * GIB, 4 * GIB)


def test_a_test_domain_has_no_block_resize_and_says_so(setup):
    """No blockResize on the test driver: `disk_resize` answers `disk_resize_unsupported` (the extend step then
    grows the volume on its pool, which holds no open image there)."""
    from apps.core.drivers import DriverConflict

    drv, pool, guest, _compute = setup
    dom = guest(running=True)
    key = str(uuid.uuid4())
    vol = drv.volume_create(VolumeSpec(key=key, pool=pool.name, size_gib=1))
    drv.disk_attach(dom, DiskAttachment(volume_path=vol.path, target_dev="vdb", serial=disk_serial(key)), live=True)
    with pytest.raises(DriverConflict) as exc:
        drv.disk_resize(dom, "vdb", 2)
    assert exc.value.code == "disk_resize_unsupported"
    assert drv.volume_resize(pool.name, key, 2).capacity_bytes == 2 * GIB
