"""Which storage driver serves a volume, and the specs the workflows hand it (`apps.storage.drivers`).

A host-local type's volume is on its host's libvirt (`host.libvirt_uri`); a shared type's volume is made through
`STORAGE_SHARED_POOL_URI` (`conf.shared_pool_uri`) and attached through the instance's host, which gets the
pool too (`pool_ensure` is idempotent). Keys are our UUIDs (volume and snapshot ids), so a
retried step finds what the last try made."""
from __future__ import annotations


def driver_for(host=None):
    """The storage driver for a volume on `host` (an `inventory.Host`), or for shared pools (None)."""
    from ..conf import shared_pool_uri
    from ..drivers import get_driver

    return get_driver(host.libvirt_uri if host is not None else shared_pool_uri())


def pool_spec(volume_type):
    from ..drivers.base import PoolSpec

    return PoolSpec(name=volume_type.pool, kind=volume_type.pool_kind, target_path=volume_type.pool_target_path,
                    source=volume_type.pool_source)


def volume_spec(volume, backing: str = ""):
    from ..drivers.base import VolumeSpec

    return VolumeSpec(key=str(volume.pk), pool=volume.volume_type.pool, size_gib=volume.size_gib, backing=backing)


def disk_attachment(volume, path: str, device: str):
    """The guest disk of `volume` at `path` as `device`; its serial names the volume (`drivers.base.disk_serial`)."""
    from ..drivers.base import DiskAttachment, disk_serial

    return DiskAttachment(volume_path=path, target_dev=device, serial=disk_serial(volume.pk))
