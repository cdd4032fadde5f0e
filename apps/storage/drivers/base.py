"""The storage driver port: what the control plane asks of a host's block storage, in typed frozen dataclasses.

Drivers import nothing from models, services or api. They raise only `apps.core.drivers` exceptions:
- `DriverTransientError` (code `host_unreachable`, `disk_detach_pending`): retry with backoff.
- `DriverNotFound` (`pool_not_found`, `volume_not_found`, `snapshot_not_found`, `domain_not_found`,
  `disk_not_found`).
- `DriverConflict` (`pool_definition_mismatch`, `volume_size_mismatch`, `disk_target_taken`,
  `volume_already_attached`, `volume_in_use`, `domain_not_running`, `disk_resize_unsupported`).
- `DriverError`: terminal (`volume_shrink_refused`, `invalid_disk_attachment`, `invalid_pool_spec`, ...).

Every object is keyed by our UUID: a volume's pool volume name is our volume UUID, a snapshot's is our snapshot
UUID, so a retried step finds what the last try made (`volume_create` returns the volume it already made,
`volume_delete` of a missing volume is a no-op, `disk_attach` of an attached disk is a no-op).

Snapshots are full, independent copies in the same pool (see `StorageDriver.snapshot_create`), and a volume
restored from a snapshot is a full copy too, so volumes and snapshots can be deleted in any order.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

GIB = 1024**3
POOL_KINDS = ("dir", "logical", "netfs")
VOLUME_FORMATS = ("qcow2", "raw")
DISK_BUSES = ("virtio", "scsi")
# virtio-blk reports at most 20 bytes of serial (VIRTIO_BLK_ID_BYTES in the virtio spec, "Device
# configuration layout" of the block device); the guest sees it as /dev/disk/by-id/virtio-<serial>.
SERIAL_MAX_CHARS = 20


def disk_serial(volume_uuid: uuid.UUID | str) -> str:
    """The disk serial a guest sees for our volume: its UUID without dashes, cut to 20 characters
    (``0192f6c1-...`` → ``0192f6c1xxxxxxxxxxxx``), so `/dev/disk/by-id/virtio-<serial>` names the volume."""
    return uuid.UUID(str(volume_uuid)).hex[:SERIAL_MAX_CHARS]


@dataclass(frozen=True)
class PoolSpec:
    """A storage pool on a host.

    `kind`: ``dir`` (a directory on the host's local NVMe file system: the local tier), ``logical`` (an LVM
    volume group, `source` = its name; volumes are raw logical volumes) or ``netfs`` (an NFS export mounted at
    `target_path`, `source` = ``host:/export``: the shared tier). `target_path` is an absolute path.
    """

    name: str
    kind: str
    target_path: str
    source: str = ""


@dataclass(frozen=True)
class VolumeSpec:
    """A volume to create: `key` (our volume UUID, also the pool volume name) in `pool`, `size_gib` GiB
    (virtual size), `format` ``qcow2`` or ``raw`` (logical pools take ``raw`` only), and `backing`: the path of
    an image to start from ('' = empty). A qcow2 volume with a backing image is a copy-on-write overlay of it,
    so the image must stay in place and unchanged while the volume lives (images are immutable).
    `backing_format` is the image's format ('' = ask the pool holding it; ``qcow2`` when none does)."""

    key: str
    pool: str
    size_gib: int
    format: str = "qcow2"
    backing: str = ""
    backing_format: str = ""


@dataclass(frozen=True)
class VolumeInfo:
    """What the pool reports about one volume. Sizes in bytes: `capacity_bytes` is the virtual size the guest
    sees, `allocation_bytes` what it occupies on the pool (thin: grows with writes)."""

    key: str
    pool: str
    path: str
    capacity_bytes: int
    allocation_bytes: int
    format: str


@dataclass(frozen=True)
class SnapshotInfo:
    """A point-in-time copy of volume `volume_key`, stored as the pool volume `key` at `path`. `size_bytes` is
    its virtual size (the volume's capacity when taken), `allocation_bytes` what it occupies on the pool."""

    key: str
    volume_key: str
    pool: str
    path: str
    size_bytes: int
    allocation_bytes: int = 0


@dataclass(frozen=True)
class DiskAttachment:
    """A volume as a guest disk: `volume_path` on the host, `target_dev` the guest device name (``vdb``.. on
    virtio, ``sdb``.. on scsi: the prefix must match `bus`), `serial` (see `disk_serial`, at most 20 characters)
    and `read_only`. `format` is the image format; '' lets the driver ask the pool (by path)."""

    volume_path: str
    target_dev: str
    bus: str = "virtio"
    serial: str = ""
    read_only: bool = False
    format: str = ""


@runtime_checkable
class StorageDriver(Protocol):
    """A host's storage pools and its domains' disks (one driver per host URI). All methods are idempotent."""

    uri: str

    def pool_ensure(self, spec: PoolSpec) -> None:
        """Define, build, start and autostart the pool; each step only if not yet done. `DriverConflict`
        (`pool_definition_mismatch`) when a pool of that name exists with another kind or target path."""

    def volume_create(self, spec: VolumeSpec) -> VolumeInfo:
        """Create the volume `spec.key`; an existing one of that key and size is returned as is.
        `DriverConflict` (`volume_size_mismatch`) when it exists with another size; `DriverNotFound`
        (`pool_not_found`) without the pool; `DriverError` for a bad format or backing image."""

    def volume_get(self, pool: str, key: str) -> VolumeInfo:
        """`DriverNotFound` (`volume_not_found`, or `pool_not_found`)."""

    def volume_resize(self, pool: str, key: str, size_gib: int) -> VolumeInfo:
        """Grow to `size_gib` GiB (the same size is a no-op). `DriverError` (`volume_shrink_refused`) for a
        smaller size; `DriverConflict` (`volume_in_use`) when a running guest holds the image open (grow it
        with `disk_resize` then)."""

    def disk_resize(self, domain_uuid: str, target_dev: str, size_gib: int) -> None:
        """Grow an attached volume under its running guest to `size_gib` GiB (the guest sees a capacity
        change; its file system is its own business). `DriverError` (`volume_shrink_refused`);
        `DriverConflict` (`domain_not_running`) when the domain is shut off, (`disk_resize_unsupported`) on a
        hypervisor without it (libvirt's test driver, whose images are not held open): use `volume_resize` then;
        `DriverNotFound` (`disk_not_found`) when no disk has that target."""

    def volume_delete(self, pool: str, key: str) -> None:
        """Delete the volume; a missing volume is a no-op. The caller detaches it first."""

    def snapshot_create(self, pool: str, volume_key: str, snapshot_key: str) -> SnapshotInfo:
        """A full copy of the volume as the pool volume `snapshot_key` (an existing one is returned)."""

    def snapshot_delete(self, pool: str, snapshot_key: str) -> None:
        """Delete the snapshot; a missing one is a no-op."""

    def volume_from_snapshot(self, pool: str, snapshot_key: str, spec: VolumeSpec) -> VolumeInfo:
        """A new volume `spec.key` holding the snapshot's data, `spec.size_gib` >= the snapshot's size
        (`DriverError` `volume_shrink_refused` otherwise). `DriverNotFound` (`snapshot_not_found`)."""

    def disk_attach(self, domain_uuid: str, attachment: DiskAttachment, live: bool) -> None:
        """Attach to the domain's persistent definition, and to the running guest too when `live` and the
        domain runs. A disk already there with that target and path is a no-op; `DriverConflict`
        (`disk_target_taken`) when the target holds another volume. `DriverNotFound` (`domain_not_found`)."""

    def disk_detach(self, domain_uuid: str, target_dev: str, live: bool) -> None:
        """Detach the disk with `target_dev` (a missing one is a no-op). A live detach needs the guest to
        release the device; while it has not, `DriverTransientError` (`disk_detach_pending`): call again."""

    def attached_disks(self, domain_uuid: str) -> list[DiskAttachment]:
        """The domain's disks (`device='disk'`, the root disk too), from the live definition when it runs,
        the persistent one otherwise."""
