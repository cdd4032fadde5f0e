"""Storage pool, volume and disk XML for libvirt, built and parsed with ElementTree. Pure functions.

Element names follow libvirt's "Storage pool and volume XML format" (libvirt.org/formatstorage.html) and the
`<disk>` element of "Domain XML format" (libvirt.org/formatdomain.html#hard-drives-floppy-disks-cdroms).
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from apps.core.drivers import DriverError

from ..base import (
    DISK_BUSES,
    GIB,
    POOL_KINDS,
    SERIAL_MAX_CHARS,
    VOLUME_FORMATS,
    DiskAttachment,
    PoolSpec,
    VolumeSpec,
)

# libvirt's own rule for a disk serial (domaincommon.rng, `diskSerial`), with virtio-blk's 20-byte limit.
_SERIAL_RE = re.compile(r"^[A-Za-z0-9_.+\- ]*$")
_TARGET_RE = {"virtio": re.compile(r"^vd[a-z]{1,2}$"), "scsi": re.compile(r"^sd[a-z]{1,2}$")}
_NETFS_SOURCE_RE = re.compile(r"^(?P<host>[A-Za-z0-9.\-\[\]:]+):(?P<dir>/.*)$")


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, tag, attrs)
    if text is not None:
        el.text = text
    return el


def pool_xml(spec: PoolSpec) -> str:
    """The `<pool>` document for `spec`. Raises `DriverError` (`invalid_pool_spec`) for an unknown kind, a
    relative target path, a logical pool without a volume group name or a netfs source not ``host:/export``."""
    if spec.kind not in POOL_KINDS:
        raise DriverError(f"pool kind {spec.kind!r} is not one of {POOL_KINDS}", code="invalid_pool_spec")
    if not spec.target_path.startswith("/"):
        raise DriverError(f"pool target path {spec.target_path!r} is not absolute", code="invalid_pool_spec")
    root = ET.Element("pool", type=spec.kind)
    _sub(root, "name", spec.name)
    if spec.kind == "logical":
        if not spec.source:
            raise DriverError("a logical pool needs its volume group name as source", code="invalid_pool_spec")
        source = _sub(root, "source")
        _sub(source, "name", spec.source)
        _sub(source, "format", type="lvm2")
    elif spec.kind == "netfs":
        m = _NETFS_SOURCE_RE.match(spec.source)
        if not m:
            raise DriverError(f"netfs source {spec.source!r} is not host:/export", code="invalid_pool_spec")
        source = _sub(root, "source")
        _sub(source, "host", name=m["host"])
        _sub(source, "dir", path=m["dir"])
        _sub(source, "format", type="nfs")
    _sub(_sub(root, "target"), "path", spec.target_path)
    return ET.tostring(root, encoding="unicode")


def parse_pool(xml: str) -> tuple[str, str]:
    """(kind, target path) of a pool's XMLDesc."""
    root = ET.fromstring(xml)
    return root.get("type", ""), (root.findtext("target/path") or "").rstrip("/") or "/"


def volume_xml(spec: VolumeSpec, *, backing_format: str = "") -> str:
    """The `<volume>` document for `spec` (capacity in GiB). With `spec.backing`, a qcow2 overlay whose
    `<backingStore>` is that image in `backing_format` (default: the volume's format). Raises `DriverError`
    (`invalid_volume_spec`) for a size below 1 GiB, an unknown format or a raw volume with a backing image."""
    if spec.size_gib < 1:
        raise DriverError(f"volume size {spec.size_gib} GiB is below 1 GiB", code="invalid_volume_spec")
    if spec.format not in VOLUME_FORMATS:
        raise DriverError(f"volume format {spec.format!r} is not one of {VOLUME_FORMATS}",
                          code="invalid_volume_spec")
    if spec.backing and spec.format != "qcow2":
        raise DriverError("only a qcow2 volume can have a backing image", code="invalid_volume_spec")
    root = _volume(spec.key, spec.size_gib * GIB, spec.format)
    if spec.backing:
        backing = _sub(root, "backingStore")
        _sub(backing, "path", spec.backing)
        _sub(backing, "format", type=backing_format or spec.format)
    return ET.tostring(root, encoding="unicode")


def _volume(name: str, capacity_bytes: int, fmt: str) -> ET.Element:
    root = ET.Element("volume")
    _sub(root, "name", name)
    _sub(root, "capacity", str(capacity_bytes), unit="bytes")
    _sub(_sub(root, "target"), "format", type=fmt)
    return root


def copy_xml(name: str, capacity_bytes: int, fmt: str) -> str:
    """The `<volume>` document of a full copy (`createXMLFrom`): `capacity_bytes` in `fmt`."""
    if fmt not in VOLUME_FORMATS:
        raise DriverError(f"volume format {fmt!r} is not one of {VOLUME_FORMATS}", code="invalid_volume_spec")
    return ET.tostring(_volume(name, capacity_bytes, fmt), encoding="unicode")


def parse_volume_format(xml: str) -> str:
    """The `<target><format type>` of a volume's XMLDesc ('raw' when the pool reports none, as LVM does)."""
    fmt = ET.fromstring(xml).find("target/format")
    return fmt.get("type", "raw") if fmt is not None else "raw"


def validate_attachment(att: DiskAttachment) -> None:
    """Raises `DriverError` (`invalid_disk_attachment`) for an unknown bus, a target not matching its bus
    (``vdX`` on virtio, ``sdX`` on scsi), a relative path or a serial libvirt or virtio-blk would refuse."""
    if att.bus not in DISK_BUSES:
        raise DriverError(f"disk bus {att.bus!r} is not one of {DISK_BUSES}", code="invalid_disk_attachment")
    if not _TARGET_RE[att.bus].match(att.target_dev):
        raise DriverError(f"target {att.target_dev!r} does not name a {att.bus} disk",
                          code="invalid_disk_attachment")
    if not att.volume_path.startswith("/"):
        raise DriverError(f"volume path {att.volume_path!r} is not absolute", code="invalid_disk_attachment")
    if len(att.serial) > SERIAL_MAX_CHARS or not _SERIAL_RE.match(att.serial):
        raise DriverError(f"serial {att.serial!r}: at most {SERIAL_MAX_CHARS} of [A-Za-z0-9_.+- ]",
                          code="invalid_disk_attachment")


def disk_xml(att: DiskAttachment, *, source_type: str = "file", image_format: str = "qcow2",
             cache: str = "none") -> str:
    """The `<disk device='disk'>` element that attaches `att`.

    `source_type` ``file`` (dir and netfs pools) or ``block`` (logical volumes); `image_format` the driver
    type (``qcow2``/``raw``; `att.format` wins when set). `cache='none'` (O_DIRECT, the host page cache is
    bypassed, so a guest's flush reaches the device) with `io='native'`, the data-integrity setting for
    local NVMe and NFS alike; `discard='unmap'` passes the guest's TRIM down so thin volumes shrink back.
    Raises `DriverError` (`invalid_disk_attachment`, see `validate_attachment`).
    """
    validate_attachment(att)
    if source_type not in ("file", "block"):
        raise DriverError(f"disk source type {source_type!r}", code="invalid_disk_attachment")
    disk = ET.Element("disk", type=source_type, device="disk")
    driver = {"name": "qemu", "type": att.format or image_format, "cache": cache, "discard": "unmap"}
    if cache in ("none", "directsync"):
        driver["io"] = "native"  # QEMU's native AIO needs O_DIRECT
    _sub(disk, "driver", **driver)
    _sub(disk, "source", **{"file" if source_type == "file" else "dev": att.volume_path})
    _sub(disk, "target", dev=att.target_dev, bus=att.bus)
    if att.serial:
        _sub(disk, "serial", att.serial)
    if att.read_only:
        _sub(disk, "readonly")
    return ET.tostring(disk, encoding="unicode")


def detach_xml(target_dev: str, bus: str) -> str:
    """The minimal `<disk>` libvirt needs to find the disk to detach: its target."""
    disk = ET.Element("disk", type="file", device="disk")
    _sub(disk, "target", dev=target_dev, bus=bus)
    return ET.tostring(disk, encoding="unicode")


def parse_disks(domain_xml: str) -> list[DiskAttachment]:
    """Every `<disk device='disk'>` of a domain's XMLDesc, in document order, as `DiskAttachment`s."""
    out = []
    for disk in ET.fromstring(domain_xml).iterfind("devices/disk"):
        if disk.get("device", "disk") != "disk":
            continue
        source, target, driver = disk.find("source"), disk.find("target"), disk.find("driver")
        path = ""
        if source is not None:
            path = source.get("file") or source.get("dev") or ""
        out.append(DiskAttachment(
            volume_path=path, target_dev=target.get("dev", "") if target is not None else "",
            bus=target.get("bus", "") if target is not None else "", serial=disk.findtext("serial") or "",
            read_only=disk.find("readonly") is not None,
            format=driver.get("type", "") if driver is not None else ""))
    return out


def domain_with_disk(domain_xml: str, disk: str) -> str:
    """`domain_xml` (a domain's inactive XMLDesc) with the `<disk>` element `disk` appended to its devices."""
    root = ET.fromstring(domain_xml)
    root.find("devices").append(ET.fromstring(disk))
    return ET.tostring(root, encoding="unicode")


def domain_without_disk(domain_xml: str, target_dev: str) -> str:
    """`domain_xml` without its `<disk>` whose target is `target_dev` (unchanged when there is none)."""
    root = ET.fromstring(domain_xml)
    devices = root.find("devices")
    for disk in list(devices.iterfind("disk")):
        target = disk.find("target")
        if target is not None and target.get("dev") == target_dev:
            devices.remove(disk)
    return ET.tostring(root, encoding="unicode")
