"""`FakeStorageDriver`: an in-memory storage driver for fast tests of the layers above the port.

Same contract as `LibvirtStorageDriver` (tests/storage/test_driver_libvirt.py runs one suite on both). State
lives per URI in the process. Domains are those of compute's `FakeDriver` on the same URI (a domain runs when
its power state is running), so an upper-layer test that boots an instance with the compute fake can attach a
volume to it. Volume content is kept as bytes (`write_bytes` / `read_bytes` stand in for a guest), copied by
snapshots and restores like the real full copies.

Failure knobs: `FakeStorageDriver.unreachable.add(uri)` makes every call on that URI raise
`DriverTransientError` (`host_unreachable`); `FakeStorageDriver.guest_keeps_disks.add(domain_uuid)` makes that
guest ignore virtio hot-unplug requests (like a guest with no OS), so live detaches stay pending.
"""
from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field, replace

from apps.compute.drivers.base import PowerState
from apps.compute.drivers.fake import FakeDriver
from apps.core.drivers import DriverConflict, DriverError, DriverNotFound, DriverTransientError

from .base import GIB, DiskAttachment, PoolSpec, SnapshotInfo, VolumeInfo, VolumeSpec
from .libvirt import xml as stxml


@dataclass
class _Volume:
    info: VolumeInfo
    data: bytearray = field(default_factory=bytearray)  # the first bytes written; the rest reads as zeroes


@dataclass
class _Disks:
    config: list[DiskAttachment] = field(default_factory=list)
    live: list[DiskAttachment] | None = None  # None while the domain is shut off


@dataclass
class _Host:
    pools: dict[str, PoolSpec] = field(default_factory=dict)
    volumes: dict[tuple[str, str], _Volume] = field(default_factory=dict)
    disks: dict[str, _Disks] = field(default_factory=dict)


class FakeStorageDriver:
    _hosts: dict[str, _Host] = {}
    _lock = threading.RLock()
    unreachable: set[str] = set()
    guest_keeps_disks: set[str] = set()

    def __init__(self, uri: str, **_ignored):
        self.uri = uri
        with self._lock:
            self.host = self._hosts.setdefault(uri, _Host())

    @classmethod
    def reset(cls) -> None:
        with cls._lock:
            cls._hosts.clear()
            cls.unreachable.clear()
            cls.guest_keeps_disks.clear()

    # -- test hooks: a guest's reads and writes ---------------------------------------------------------
    def _by_path(self, path: str) -> _Volume:
        for vol in self.host.volumes.values():
            if vol.info.path == path:
                return vol
        raise DriverNotFound(f"no volume at {path}", code="volume_not_found")

    def write_bytes(self, path: str, offset: int, data: bytes) -> None:
        vol = self._by_path(path)
        if offset + len(data) > vol.info.capacity_bytes:
            raise DriverError("write past the end of the volume", code="invalid_argument")
        if len(vol.data) < offset + len(data):
            vol.data.extend(bytes(offset + len(data) - len(vol.data)))
        vol.data[offset:offset + len(data)] = data

    def read_bytes(self, path: str, offset: int, length: int) -> bytes:
        chunk = bytes(self._by_path(path).data[offset:offset + length])
        return chunk + bytes(length - len(chunk))

    # -- plumbing -----------------------------------------------------------------------------------
    def _check(self) -> None:
        if self.uri in self.unreachable:
            raise DriverTransientError(f"cannot connect to {self.uri}", code="host_unreachable")

    def _pool(self, name: str) -> PoolSpec:
        self._check()
        spec = self.host.pools.get(name)
        if spec is None:
            raise DriverNotFound(f"lookup pool {name}: Storage pool not found", code="pool_not_found")
        return spec

    def _vol(self, pool: str, key: str, *, not_found: str = "volume_not_found") -> _Volume:
        self._pool(pool)
        vol = self.host.volumes.get((pool, key))
        if vol is None:
            raise DriverNotFound(f"no volume {key} in pool {pool}", code=not_found)
        return vol

    def _add(self, pool: str, key: str, capacity: int, fmt: str, data: bytes = b"") -> _Volume:
        spec = self._pool(pool)
        vol = _Volume(VolumeInfo(key=key, pool=pool, path=f"{spec.target_path.rstrip('/')}/{key}",
                                 capacity_bytes=capacity, allocation_bytes=len(data), format=fmt), bytearray(data))
        self.host.volumes[(pool, key)] = vol
        return vol

    def _existing(self, vol: _Volume, size_gib: int) -> VolumeInfo:
        if vol.info.capacity_bytes != size_gib * GIB:
            raise DriverConflict(f"volume {vol.info.key} exists with {vol.info.capacity_bytes} bytes",
                                 code="volume_size_mismatch")
        return self._current(vol)

    @staticmethod
    def _current(vol: _Volume) -> VolumeInfo:
        return replace(vol.info, allocation_bytes=len(vol.data.rstrip(b"\0")))

    def _in_use(self, path: str) -> bool:
        return any(any(d.volume_path == path for d in disks.live or ()) for disks in self.host.disks.values())

    # -- pools and volumes ----------------------------------------------------------------------------
    def pool_ensure(self, spec: PoolSpec) -> None:
        self._check()
        stxml.pool_xml(spec)
        with self._lock:
            old = self.host.pools.get(spec.name)
            if old is not None and (old.kind, old.target_path.rstrip("/")) != (spec.kind, spec.target_path.rstrip("/")):
                raise DriverConflict(f"pool {spec.name} exists as {old.kind} at {old.target_path}",
                                     code="pool_definition_mismatch")
            self.host.pools.setdefault(spec.name, spec)

    def volume_create(self, spec: VolumeSpec) -> VolumeInfo:
        self._check()
        stxml.volume_xml(spec, backing_format=spec.backing_format)
        with self._lock:
            self._pool(spec.pool)
            vol = self.host.volumes.get((spec.pool, spec.key))
            if vol is not None:
                return self._existing(vol, spec.size_gib)
            base = b""
            if spec.backing:  # a copy-on-write overlay reads the image's bytes until written
                try:
                    base = bytes(self._by_path(spec.backing).data)
                except DriverNotFound:
                    base = b""
            return self._current(self._add(spec.pool, spec.key, spec.size_gib * GIB, spec.format, base))

    def volume_get(self, pool: str, key: str) -> VolumeInfo:
        return self._current(self._vol(pool, key))

    def volume_resize(self, pool: str, key: str, size_gib: int) -> VolumeInfo:
        with self._lock:
            vol = self._vol(pool, key)
            want = size_gib * GIB
            if want < vol.info.capacity_bytes:
                raise DriverError(f"volume {key} is {vol.info.capacity_bytes} bytes; {size_gib} GiB would shrink it",
                                  code="volume_shrink_refused")
            if want > vol.info.capacity_bytes:
                if self._in_use(vol.info.path):
                    raise DriverConflict(f"resize volume {key}: the image is locked by a guest", code="volume_in_use")
                vol.info = replace(vol.info, capacity_bytes=want)
            return self._current(vol)

    def disk_resize(self, domain_uuid: str, target_dev: str, size_gib: int) -> None:
        with self._lock:
            disks, running = self._domain(domain_uuid)
            if not running:
                raise DriverConflict(f"domain {domain_uuid} is not running", code="domain_not_running")
            found = [d for d in disks.live if d.target_dev == target_dev]
            if not found:
                raise DriverNotFound(f"domain {domain_uuid} has no disk {target_dev}", code="disk_not_found")
            vol = self._by_path(found[0].volume_path)
            if size_gib * GIB < vol.info.capacity_bytes:
                raise DriverError(f"disk {target_dev} is {vol.info.capacity_bytes} bytes", code="volume_shrink_refused")
            vol.info = replace(vol.info, capacity_bytes=max(vol.info.capacity_bytes, size_gib * GIB))

    def volume_delete(self, pool: str, key: str) -> None:
        self._check()
        with self._lock:
            self.host.volumes.pop((pool, key), None)

    # -- snapshots ------------------------------------------------------------------------------------
    def snapshot_create(self, pool: str, volume_key: str, snapshot_key: str) -> SnapshotInfo:
        with self._lock:
            self._pool(pool)
            snap = self.host.volumes.get((pool, snapshot_key))
            if snap is None:
                src = self._vol(pool, volume_key)
                if self._in_use(src.info.path):
                    raise DriverConflict(f"snapshot volume {volume_key}: the image is locked by a guest",
                                         code="volume_in_use")
                snap = self._add(pool, snapshot_key, src.info.capacity_bytes, src.info.format, bytes(src.data))
            info = self._current(snap)
            return SnapshotInfo(key=snapshot_key, volume_key=volume_key, pool=pool, path=info.path,
                                size_bytes=info.capacity_bytes, allocation_bytes=info.allocation_bytes)

    def snapshot_delete(self, pool: str, snapshot_key: str) -> None:
        self.volume_delete(pool, snapshot_key)

    def volume_from_snapshot(self, pool: str, snapshot_key: str, spec: VolumeSpec) -> VolumeInfo:
        with self._lock:
            snap = self._vol(pool, snapshot_key, not_found="snapshot_not_found")
            if spec.size_gib * GIB < snap.info.capacity_bytes:
                raise DriverError(f"snapshot {snapshot_key} is {snap.info.capacity_bytes} bytes", code="volume_shrink_refused")
            self._pool(spec.pool)
            vol = self.host.volumes.get((spec.pool, spec.key))
            if vol is None:
                vol = self._add(spec.pool, spec.key, spec.size_gib * GIB, spec.format, bytes(snap.data))
            return self._existing(vol, spec.size_gib)

    # -- disks ----------------------------------------------------------------------------------------
    def _domain(self, domain_uuid: str) -> tuple[_Disks, bool]:
        """The domain's disks and whether it runs; a shut-off domain has no live disks, a started one boots
        with its persistent disks."""
        self._check()
        compute = FakeDriver._hosts.get(self.uri)
        info = compute.domains.get(uuid.UUID(str(domain_uuid))) if compute else None
        if info is None:
            raise DriverNotFound(f"lookup domain {domain_uuid}: Domain not found", code="domain_not_found")
        disks = self.host.disks.setdefault(str(info.uuid), _Disks())
        running = info.power_state == PowerState.RUNNING
        if not running:
            disks.live = None
        elif disks.live is None:
            disks.live = list(disks.config)
        return disks, running

    @staticmethod
    def _needs(disks: list[DiskAttachment], att: DiskAttachment, where: str) -> bool:
        for disk in disks:
            if disk.target_dev == att.target_dev:
                if disk.volume_path != att.volume_path:
                    raise DriverConflict(f"target {att.target_dev} holds {disk.volume_path} ({where})",
                                         code="disk_target_taken")
                return False
            if disk.volume_path == att.volume_path:
                raise DriverConflict(f"{att.volume_path} is attached as {disk.target_dev} ({where})",
                                     code="volume_already_attached")
        return True

    def disk_attach(self, domain_uuid: str, attachment: DiskAttachment, live: bool) -> None:
        stxml.validate_attachment(attachment)
        with self._lock:
            disks, running = self._domain(domain_uuid)
            vol = self._by_path(attachment.volume_path)
            att = replace(attachment, format=attachment.format or vol.info.format)
            if self._needs(disks.config, att, "persistent"):
                disks.config.append(att)
            if live and running and self._needs(disks.live, att, "live"):
                disks.live.append(att)

    def disk_detach(self, domain_uuid: str, target_dev: str, live: bool) -> None:
        with self._lock:
            disks, running = self._domain(domain_uuid)
            disks.config = [d for d in disks.config if d.target_dev != target_dev]
            if not (live and running):
                return
            found = [d for d in disks.live if d.target_dev == target_dev]
            if found and found[0].bus == "virtio" and str(domain_uuid) in self.guest_keeps_disks:
                raise DriverTransientError(f"{domain_uuid}: the guest has not released {target_dev} yet",
                                           code="disk_detach_pending")
            disks.live = [d for d in disks.live if d.target_dev != target_dev]

    def attached_disks(self, domain_uuid: str) -> list[DiskAttachment]:
        with self._lock:
            disks, running = self._domain(domain_uuid)
            return list(disks.live if running else disks.config)
