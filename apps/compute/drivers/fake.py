"""`FakeDriver`: an in-memory compute driver for fast unit tests of the layers above the port.

It follows the same contract as `LibvirtDriver` (the contract suite in tests/drivers/contract runs on both),
keeps its state per URI in the process (like libvirt's `test:///default`), and can be told to fail:
`FakeDriver.unreachable.add(uri)` makes every call on that URI raise `DriverTransientError`
(code `host_unreachable`); `FakeDriver.fail_define[uri] = "code"` makes the next define fail terminally.
"""
from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field, replace

from apps.core.drivers import DriverConflict, DriverError, DriverNotFound, DriverTransientError

from .base import DomainInfo, DomainSpec, MdevHostdev, MdevTypeInfo, PowerState
from .libvirt.xml import pci_parts


@dataclass
class _Host:
    domains: dict[uuid.UUID, DomainInfo] = field(default_factory=dict)
    specs: dict[uuid.UUID, DomainSpec] = field(default_factory=dict)
    mdevs: dict[str, MdevHostdev] = field(default_factory=dict)
    mdev_types: dict[str, dict[str, int]] = field(default_factory=dict)  # parent -> {type: capacity}
    console: dict[uuid.UUID, str] = field(default_factory=dict)


class FakeDriver:
    _hosts: dict[str, _Host] = {}
    _lock = threading.Lock()
    unreachable: set[str] = set()
    fail_define: dict[str, str] = {}

    def __init__(self, uri: str, **_ignored):
        self.uri = uri
        with self._lock:
            self.host = self._hosts.setdefault(uri, _Host())

    @classmethod
    def reset(cls) -> None:
        with cls._lock:
            cls._hosts.clear()
            cls.unreachable.clear()
            cls.fail_define.clear()

    def _check(self) -> None:
        if self.uri in self.unreachable:
            raise DriverTransientError(f"cannot connect to {self.uri}", code="host_unreachable")

    def _get(self, domain_uuid: uuid.UUID) -> DomainInfo:
        self._check()
        info = self.host.domains.get(uuid.UUID(str(domain_uuid)))
        if info is None:
            raise DriverNotFound(f"lookup {domain_uuid}: Domain not found", code="domain_not_found")
        return info

    def _set(self, info: DomainInfo, state: PowerState) -> DomainInfo:
        new = replace(info, power_state=state)
        self.host.domains[info.uuid] = new
        return new

    def domain_define(self, spec: DomainSpec) -> DomainInfo:
        self._check()
        code = self.fail_define.pop(self.uri, None)
        if code:
            raise DriverError(f"define {spec.name}: injected failure", code=code)
        for info in self.host.domains.values():
            if info.name == spec.name and info.uuid != spec.uuid:
                raise DriverConflict(f"domain {spec.name} exists", code="domain_name_taken")
        for dev in spec.hostdevs:
            if hasattr(dev, "address"):
                pci_parts(dev.address)
        old = self.host.domains.get(spec.uuid)
        info = DomainInfo(uuid=spec.uuid, name=spec.name,
                          power_state=old.power_state if old else PowerState.SHUTOFF, vcpus=spec.vcpus,
                          memory_mib=spec.memory_mib, persistent=True, managed=True, project_id=spec.project_id)
        self.host.domains[spec.uuid] = info
        self.host.specs[spec.uuid] = spec
        return info

    def domain_start(self, domain_uuid):
        info = self._get(domain_uuid)
        for dev in self.host.specs[info.uuid].hostdevs:
            if isinstance(dev, MdevHostdev) and dev.uuid not in self.host.mdevs:
                raise DriverNotFound(f"mdev {dev.uuid} does not exist", code="device_not_found")
        self.host.console[info.uuid] = self.host.console.get(info.uuid, "") + f"{info.name} login: \n"
        return self._set(info, PowerState.RUNNING)

    def domain_stop(self, domain_uuid, *, hard: bool = False):
        return self._set(self._get(domain_uuid), PowerState.SHUTOFF)

    def domain_reboot(self, domain_uuid, *, hard: bool = False):
        info = self._get(domain_uuid)
        if info.power_state != PowerState.RUNNING:
            raise DriverConflict(f"domain {domain_uuid} is not running", code="domain_not_running")
        return info

    def domain_delete(self, domain_uuid) -> None:
        self._check()
        key = uuid.UUID(str(domain_uuid))
        self.host.domains.pop(key, None)
        self.host.specs.pop(key, None)
        self.host.console.pop(key, None)

    def domain_get(self, domain_uuid):
        return self._get(domain_uuid)

    def domain_list(self):
        self._check()
        return list(self.host.domains.values())

    def console_log(self, domain_uuid, *, max_bytes: int = 65536) -> str:
        info = self._get(domain_uuid)
        return self.host.console.get(info.uuid, "")[-max_bytes:]

    def mdev_types(self, parent: str) -> list[MdevTypeInfo]:
        self._check()
        caps = self.host.mdev_types.get(parent, {})
        used = {t: sum(1 for m in self.host.mdevs.values() if m.parent == parent and m.mdev_type == t)
                for t in caps}
        return [MdevTypeInfo(t, t, caps[t] - used[t]) for t in sorted(caps)]

    def mdev_create(self, dev: MdevHostdev) -> str:
        self._check()
        if dev.uuid in self.host.mdevs:
            return "mdev_" + dev.uuid.replace("-", "_")
        types = {t.type_id: t for t in self.mdev_types(dev.parent)}
        if dev.mdev_type not in types:
            raise DriverError(f"{dev.parent} offers no mdev type {dev.mdev_type!r}", code="mdev_type_unsupported")
        if types[dev.mdev_type].available_instances < 1:
            raise DriverError(f"no free {dev.mdev_type} instance on {dev.parent}", code="mdev_type_exhausted")
        self.host.mdevs[dev.uuid] = dev
        return "mdev_" + dev.uuid.replace("-", "_")

    def mdev_delete(self, mdev_uuid: str) -> None:
        self._check()
        self.host.mdevs.pop(mdev_uuid, None)
