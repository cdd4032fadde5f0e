"""`LibvirtDriver`: the compute port over libvirt-python, one instance per host URI.

URIs: `qemu+tls://host/system` in production (docs/host-preparation.md), `qemu:///embed?root=/dir` for
daemonless tests with QEMU under TCG, `test:///default` for the demo fleet and fast contract tests, and
`test+unix:///default?socket=DIR/libvirt-sock` (the test driver in a libvirtd, shared by every process) for tests
with several worker processes.

Errors (see `apps.compute.drivers.base`): connection/RPC failures → `DriverTransientError` (code
`host_unreachable`, and the cached connection is dropped); invalid XML → `DriverError` `invalid_domain_xml`;
unsupported configuration (e.g. passthrough on a host without VFIO) → `domain_config_unsupported`; a missing
node device → `DriverNotFound` `device_not_found`; a missing domain → `DriverNotFound` `domain_not_found`.
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import libvirt

from apps.core.drivers import DriverConflict, DriverError, DriverNotFound, DriverTransientError

from .. import seed as seedmod
from ..base import DomainInfo, DomainSpec, MdevHostdev, MdevTypeInfo, PowerState
from . import xml as domxml
from .connection import drop_connection, get_connection, is_remote, is_test_driver

_POWER = {
    libvirt.VIR_DOMAIN_NOSTATE: PowerState.NOSTATE,
    libvirt.VIR_DOMAIN_RUNNING: PowerState.RUNNING,
    libvirt.VIR_DOMAIN_BLOCKED: PowerState.BLOCKED,
    libvirt.VIR_DOMAIN_PAUSED: PowerState.PAUSED,
    libvirt.VIR_DOMAIN_SHUTDOWN: PowerState.SHUTDOWN,
    libvirt.VIR_DOMAIN_SHUTOFF: PowerState.SHUTOFF,
    libvirt.VIR_DOMAIN_CRASHED: PowerState.CRASHED,
    libvirt.VIR_DOMAIN_PMSUSPENDED: PowerState.PMSUSPENDED,
}
_TRANSIENT_CODES = {
    libvirt.VIR_ERR_NO_CONNECT, libvirt.VIR_ERR_RPC, libvirt.VIR_ERR_OPERATION_TIMEOUT,
    libvirt.VIR_ERR_AGENT_UNRESPONSIVE, libvirt.VIR_ERR_AUTH_UNAVAILABLE, libvirt.VIR_ERR_INVALID_CONN,
}
_TRANSIENT_DOMAINS = {libvirt.VIR_FROM_RPC, libvirt.VIR_FROM_REMOTE}
_TERMINAL_CODES = {
    libvirt.VIR_ERR_XML_ERROR: "invalid_domain_xml",
    libvirt.VIR_ERR_XML_DETAIL: "invalid_domain_xml",
    libvirt.VIR_ERR_XML_INVALID_SCHEMA: "invalid_domain_xml",
    libvirt.VIR_ERR_CONFIG_UNSUPPORTED: "domain_config_unsupported",
    libvirt.VIR_ERR_NO_SUPPORT: "operation_unsupported",
    libvirt.VIR_ERR_INVALID_ARG: "invalid_argument",
}


class LibvirtDriver:
    """The compute driver for one libvirt URI.

    `seed_dir`: where NoCloud seed ISOs and serial logs are written for local URIs (default: a `gpucloud`
    folder under the embed root, or /var/lib/libvirt/gpucloud for qemu:///system). Remote URIs upload seeds
    into the storage pool `pool` instead, except the test driver's (it takes no uploads and reads no files, so
    its seeds stay in `seed_dir` like a local URI's).
    """

    def __init__(self, uri: str, *, seed_dir: str | None = None, pool: str = "default",
                 timeout: float = 10.0):
        self.uri = uri
        self.pool = pool
        self.timeout = timeout
        self.seed_dir = seed_dir or self._default_seed_dir(uri)
        #: seeds and serial logs are files in `seed_dir` (not volumes of `pool`)
        self.local_files = not is_remote(uri) or is_test_driver(uri)

    # -- plumbing -----------------------------------------------------------------------------------
    @staticmethod
    def _default_seed_dir(uri: str) -> str:
        if "embed" in uri and "root=" in uri:
            return os.path.join(uri.split("root=", 1)[1].split("&", 1)[0], "gpucloud")
        return "/var/lib/libvirt/gpucloud"

    def _conn(self) -> libvirt.virConnect:
        return get_connection(self.uri, timeout=self.timeout)

    def _error(self, exc: libvirt.libvirtError, what: str, *, not_found: str = "domain_not_found") -> DriverError:
        code, domain, msg = exc.get_error_code(), exc.get_error_domain(), exc.get_error_message() or str(exc)
        text = f"{what}: {msg}"
        if code in _TRANSIENT_CODES or domain in _TRANSIENT_DOMAINS or (
                code == libvirt.VIR_ERR_SYSTEM_ERROR and is_remote(self.uri)):
            drop_connection(self.uri)
            return DriverTransientError(text, code="host_unreachable")
        if code in (libvirt.VIR_ERR_NO_DOMAIN,):
            return DriverNotFound(text, code=not_found)
        if code == libvirt.VIR_ERR_NO_NODE_DEVICE:
            return DriverNotFound(text, code="device_not_found")
        if code in (libvirt.VIR_ERR_NO_STORAGE_POOL, libvirt.VIR_ERR_NO_STORAGE_VOL):
            return DriverNotFound(text, code="storage_not_found")
        if code in (libvirt.VIR_ERR_OPERATION_INVALID, libvirt.VIR_ERR_DOM_EXIST):
            return DriverConflict(text, code="domain_conflict")
        return DriverError(text, code=_TERMINAL_CODES.get(code, "libvirt_error"))

    def _lookup(self, domain_uuid: uuid.UUID) -> libvirt.virDomain:
        try:
            return self._conn().lookupByUUIDString(str(domain_uuid))
        except libvirt.libvirtError as exc:
            raise self._error(exc, f"lookup {domain_uuid}") from exc

    def _info(self, dom: libvirt.virDomain) -> DomainInfo:
        try:
            state, _reason = dom.state()
            _st, max_kib, _mem, vcpus, _cpu = dom.info()
            managed, project = domxml.parse_metadata(dom.XMLDesc(0))
            return DomainInfo(uuid=uuid.UUID(dom.UUIDString()), name=dom.name(),
                              power_state=_POWER.get(state, PowerState.NOSTATE), vcpus=vcpus,
                              memory_mib=max_kib // 1024, persistent=bool(dom.isPersistent()),
                              managed=managed, project_id=project)
        except libvirt.libvirtError as exc:
            raise self._error(exc, "read domain") from exc

    # -- files: seeds and logs ------------------------------------------------------------------------
    def _local_path(self, name: str) -> str:
        Path(self.seed_dir).mkdir(parents=True, exist_ok=True)
        return os.path.join(self.seed_dir, name)

    def _store_seed(self, spec: DomainSpec) -> str:
        data = seedmod.seed_iso(spec.seed)
        name = f"{spec.name}-seed.iso"
        if self.local_files:
            path = self._local_path(name)
            Path(path).write_bytes(data)
            return path
        return self._upload_volume(name, data)

    def _upload_volume(self, name: str, data: bytes) -> str:
        conn = self._conn()
        try:
            pool = conn.storagePoolLookupByName(self.pool)
            try:
                vol = pool.storageVolLookupByName(name)
            except libvirt.libvirtError:
                vol = pool.createXML(
                    f"<volume><name>{name}</name><capacity unit='B'>{len(data)}</capacity>"
                    "<target><format type='raw'/></target></volume>", 0)
            stream = conn.newStream(0)
            vol.upload(stream, 0, len(data), 0)
            stream.send(data)
            stream.finish()
            return vol.path()
        except libvirt.libvirtError as exc:
            raise self._error(exc, f"upload {name} to pool {self.pool}") from exc

    def _disk_path(self, spec: DomainSpec) -> str:
        """Create (once) a qcow2 overlay of the image in the storage pool; returns its path ('' = no disk)."""
        if spec.disk is None or not spec.disk.source_path:
            return ""
        name = f"{spec.name}-root.qcow2"
        try:
            pool = self._conn().storagePoolLookupByName(self.pool)
            try:
                return pool.storageVolLookupByName(name).path()
            except libvirt.libvirtError:
                pass
            vol = pool.createXML(
                f"<volume><name>{name}</name><capacity unit='GiB'>{spec.disk.size_gib}</capacity>"
                "<target><format type='qcow2'/></target><backingStore>"
                f"<path>{spec.disk.source_path}</path><format type='{spec.disk.format}'/></backingStore></volume>", 0)
            return vol.path()
        except libvirt.libvirtError as exc:
            raise self._error(exc, f"create root disk {name}") from exc

    def _delete_volumes(self, name: str) -> None:
        try:
            pool = self._conn().storagePoolLookupByName(self.pool)
        except libvirt.libvirtError:
            return
        for vol_name in (f"{name}-root.qcow2", f"{name}-seed.iso"):
            try:
                pool.storageVolLookupByName(vol_name).delete(0)
            except libvirt.libvirtError:
                continue

    # -- domains --------------------------------------------------------------------------------------
    def domain_xml(self, spec: DomainSpec, *, disk_path: str = "", seed_path: str = "") -> str:
        log = "" if not self.local_files else os.path.join(self.seed_dir, f"{spec.name}-serial.log")
        if spec.seed and not seed_path:
            seed_path = os.path.join(self.seed_dir, f"{spec.name}-seed.iso")
        return domxml.domain_xml(spec, disk_path=disk_path, seed_path=seed_path, serial_log_path=log)

    def domain_define(self, spec: DomainSpec) -> DomainInfo:
        """Define (or redefine) the persistent domain named and keyed by `spec.uuid`, validating the XML
        against libvirt's schema. Raises `DriverConflict` when the name belongs to another UUID."""
        conn = self._conn()
        try:
            other = conn.lookupByName(spec.name)
            if other.UUIDString() != str(spec.uuid):
                raise DriverConflict(f"domain {spec.name} exists with UUID {other.UUIDString()}",
                                     code="domain_name_taken")
        except libvirt.libvirtError as exc:
            if exc.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                raise self._error(exc, f"lookup {spec.name}") from exc
        seed_path = self._store_seed(spec) if spec.seed else ""
        disk_path = self._disk_path(spec)
        if self.local_files:
            Path(self.seed_dir).mkdir(parents=True, exist_ok=True)
        xml = self.domain_xml(spec, disk_path=disk_path, seed_path=seed_path)
        try:
            dom = conn.defineXMLFlags(xml, libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
        except libvirt.libvirtError as exc:
            raise self._error(exc, f"define {spec.name}") from exc
        return self._info(dom)

    def domain_start(self, domain_uuid: uuid.UUID) -> DomainInfo:
        """Start the domain; a running domain is left as is."""
        dom = self._lookup(domain_uuid)
        try:
            if not dom.isActive():
                dom.create()
        except libvirt.libvirtError as exc:
            raise self._error(exc, f"start {domain_uuid}") from exc
        return self._info(dom)

    def domain_stop(self, domain_uuid: uuid.UUID, *, hard: bool = False) -> DomainInfo:
        """Soft: ask the guest to shut down (ACPI) and return at once; hard: power off. Shut off → no-op."""
        dom = self._lookup(domain_uuid)
        try:
            if dom.isActive():
                if hard:
                    dom.destroy()
                else:
                    dom.shutdown()
        except libvirt.libvirtError as exc:
            if exc.get_error_code() == libvirt.VIR_ERR_OPERATION_INVALID and not dom.isActive():
                return self._info(dom)  # it stopped between our check and the call
            raise self._error(exc, f"stop {domain_uuid}") from exc
        return self._info(dom)

    def domain_reboot(self, domain_uuid: uuid.UUID, *, hard: bool = False) -> DomainInfo:
        """Soft: ACPI reboot request; hard: reset (power cycle without shutdown). The domain must run."""
        dom = self._lookup(domain_uuid)
        try:
            if not dom.isActive():
                raise DriverConflict(f"domain {domain_uuid} is not running", code="domain_not_running")
            if hard:
                try:
                    dom.reset(0)
                except libvirt.libvirtError as exc:
                    if exc.get_error_code() != libvirt.VIR_ERR_NO_SUPPORT:
                        raise
                    dom.destroy()  # drivers without reset (libvirt's test driver): power cycle
                    dom.create()
            else:
                dom.reboot(0)
        except libvirt.libvirtError as exc:
            raise self._error(exc, f"reboot {domain_uuid}") from exc
        return self._info(dom)

    def domain_delete(self, domain_uuid: uuid.UUID) -> None:
        """Power off and undefine (with its UEFI NVRAM), then remove its seed, serial console log and root disk.
        Missing → no-op."""
        try:
            dom = self._lookup(domain_uuid)
        except DriverNotFound:
            dom = None
        if dom is not None:
            try:
                if dom.isActive():
                    dom.destroy()
                if dom.isPersistent():
                    try:
                        dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM
                                          | libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE)
                    except libvirt.libvirtError as exc:
                        if exc.get_error_code() not in (libvirt.VIR_ERR_NO_SUPPORT, libvirt.VIR_ERR_INVALID_ARG):
                            raise
                        dom.undefine()
            except libvirt.libvirtError as exc:
                if exc.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                    raise self._error(exc, f"delete {domain_uuid}") from exc
        name = str(domain_uuid)
        if not self.local_files:
            self._delete_volumes(name)
        else:
            for suffix in ("-seed.iso", "-serial.log"):
                Path(self.seed_dir, name + suffix).unlink(missing_ok=True)
            if not is_test_driver(self.uri):
                self._delete_volumes(name)

    def domain_get(self, domain_uuid: uuid.UUID) -> DomainInfo:
        return self._info(self._lookup(domain_uuid))

    def domain_list(self) -> list[DomainInfo]:
        """Every domain on the host (ours carry `managed=True`)."""
        try:
            doms = self._conn().listAllDomains(0)
        except libvirt.libvirtError as exc:
            raise self._error(exc, "list domains") from exc
        out = []
        for dom in doms:
            try:
                out.append(self._info(dom))
            except DriverNotFound:
                continue  # undefined while we listed
        return out

    def domain_xml_get(self, domain_uuid: uuid.UUID) -> str:
        try:
            return self._lookup(domain_uuid).XMLDesc(0)
        except libvirt.libvirtError as exc:
            raise self._error(exc, f"read XML of {domain_uuid}") from exc

    def console_log(self, domain_uuid: uuid.UUID, *, max_bytes: int = 65536) -> str:
        """The last `max_bytes` of the serial console log. Local URIs read the `<log file>` the domain writes;
        remote hosts serve it through the node agent, so this raises `DriverError`
        (code `console_log_unavailable`)."""
        path = domxml.serial_log_file(self.domain_xml_get(domain_uuid))
        if not self.local_files or not path:
            raise DriverError("the serial log of a remote host is read through its node agent",
                              code="console_log_unavailable")
        try:
            with open(path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - max_bytes))
                return fh.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    # -- mediated devices (vGPU) -------------------------------------------------------------------------
    def mdev_types(self, parent: str) -> list[MdevTypeInfo]:
        """The mdev types a parent PCI device (``DDDD:BB:SS.F``) offers, with free instances."""
        try:
            dev = self._conn().nodeDeviceLookupByName(domxml.nodedev_name(parent))
            return [MdevTypeInfo(t, n, a) for t, n, a in domxml.parse_mdev_types(dev.XMLDesc(0))]
        except libvirt.libvirtError as exc:
            raise self._error(exc, f"read mdev types of {parent}") from exc

    def _find_mdev(self, mdev_uuid: str) -> libvirt.virNodeDevice | None:
        try:
            devs = self._conn().listAllDevices(libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV)
        except libvirt.libvirtError as exc:
            raise self._error(exc, "list mediated devices") from exc
        want = mdev_uuid.lower()
        for dev in devs:
            found = domxml.parse_mdev_uuid(dev.XMLDesc(0)) or dev.name().removeprefix("mdev_").replace("_", "-")
            if found.lower() == want:
                return dev
        return None

    def mdev_create(self, dev: MdevHostdev) -> str:
        """Create the mediated device `dev` through libvirt's node-device API (idempotent on `dev.uuid`);
        returns its node-device name. Errors: `mdev_type_unsupported` when the parent does not offer the type,
        `mdev_type_exhausted` when no instance is free (both terminal), transient on connection loss."""
        existing = self._find_mdev(dev.uuid)
        if existing is not None:
            return existing.name()
        types = {t.type_id: t for t in self.mdev_types(dev.parent)}
        if dev.mdev_type not in types:
            raise DriverError(f"{dev.parent} offers no mdev type {dev.mdev_type!r} (has {sorted(types)})",
                              code="mdev_type_unsupported")
        if types[dev.mdev_type].available_instances < 1:
            raise DriverError(f"no free {dev.mdev_type} instance on {dev.parent}", code="mdev_type_exhausted")
        try:
            return self._conn().nodeDeviceCreateXML(domxml.mdev_xml(dev), 0).name()
        except libvirt.libvirtError as exc:
            raise self._error(exc, f"create mdev {dev.uuid}", not_found="device_not_found") from exc

    def mdev_delete(self, mdev_uuid: str) -> None:
        """Destroy the mediated device with `mdev_uuid`; a missing one is a no-op."""
        dev = self._find_mdev(mdev_uuid)
        if dev is None:
            return
        try:
            dev.destroy()
        except libvirt.libvirtError as exc:
            if exc.get_error_code() != libvirt.VIR_ERR_NO_NODE_DEVICE:
                raise self._error(exc, f"destroy mdev {mdev_uuid}") from exc
