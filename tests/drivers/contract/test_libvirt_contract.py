"""The compute driver contract: one suite, run against every backend (see conftest.py).

On `qemu-embed` a real QEMU (TCG) process boots a tiny diskless domain to RUNNING and is shut down again.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from apps.compute.drivers.base import CloudInitSeed, ComputeDriver, DomainSpec, PciHostdev, PowerState
from apps.compute.drivers.fake import FakeDriver
from apps.compute.drivers.libvirt import LibvirtDriver
from apps.core.drivers import DriverConflict, DriverError, DriverNotFound, DriverTransientError

from .conftest import QEMU


@dataclass
class Backend:
    name: str
    driver: ComputeDriver
    spec: Callable[..., DomainSpec]
    unreachable: ComputeDriver


def _production_spec(**kw) -> DomainSpec:
    base = dict(uuid=uuid.uuid4(), vcpus=2, memory_mib=2048, project_id="p-contract", numa_node=0,
                cpuset=(2, 3), machine="q35", uefi=True, virt_type="kvm",
                hostdevs=(PciHostdev("0000:3b:00.0"),),
                seed=CloudInitSeed("i", "vm", ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB contract",)))
    base.update(kw)
    return DomainSpec(**base)


def _tcg_spec(**kw) -> DomainSpec:
    # A tiny domain: no disk, SeaBIOS loops; no hostdevs (no VFIO here).
    base = dict(uuid=uuid.uuid4(), vcpus=1, memory_mib=64, project_id="p-contract", machine="pc", uefi=False,
                virt_type="qemu", emulator=QEMU,
                seed=CloudInitSeed("i", "vm", ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB contract",)))
    base.update(kw)
    return DomainSpec(**base)


@pytest.fixture(params=["fake", "libvirt-test", "qemu-embed"])
def backend(request, tmp_path) -> Backend:
    if request.param == "fake":
        FakeDriver.reset()
        FakeDriver.unreachable.add("fake://down")
        yield Backend("fake", FakeDriver("fake://host"), _production_spec, FakeDriver("fake://down"))
        FakeDriver.reset()
    elif request.param == "libvirt-test":
        uri = request.getfixturevalue("test_node_uri")
        yield Backend("libvirt-test", LibvirtDriver(uri, seed_dir=str(tmp_path)), _production_spec,
                      LibvirtDriver("qemu+tcp://127.0.0.1:1/system", timeout=3))
    else:
        uri = request.getfixturevalue("qemu_embed_uri")
        driver = LibvirtDriver(uri)
        yield Backend("qemu-embed", driver, _tcg_spec, LibvirtDriver("qemu+tcp://127.0.0.1:1/system", timeout=3))
        for info in driver.domain_list():
            if info.project_id == "p-contract":
                driver.domain_delete(info.uuid)


def _wait(driver: ComputeDriver, domain_uuid, state: PowerState, seconds: float = 15.0) -> PowerState:
    deadline = time.monotonic() + seconds
    current = driver.domain_get(domain_uuid).power_state
    while current != state and time.monotonic() < deadline:
        time.sleep(0.1)
        current = driver.domain_get(domain_uuid).power_state
    return current


def test_define_is_idempotent_and_keyed_by_our_uuid(backend):
    spec = backend.spec()
    first = backend.driver.domain_define(spec)
    again = backend.driver.domain_define(spec)
    assert (first.uuid, first.name, first.power_state) == (spec.uuid, str(spec.uuid), PowerState.SHUTOFF)
    assert again == first
    assert (first.vcpus, first.memory_mib, first.managed, first.project_id) == (
        spec.vcpus, spec.memory_mib, True, "p-contract")
    assert [d.uuid for d in backend.driver.domain_list() if d.uuid == spec.uuid] == [spec.uuid]


def test_lifecycle_start_stop_reboot_delete(backend):
    spec = backend.spec()
    backend.driver.domain_define(spec)
    assert backend.driver.domain_start(spec.uuid).power_state == PowerState.RUNNING
    assert backend.driver.domain_start(spec.uuid).power_state == PowerState.RUNNING  # no-op when running
    assert _wait(backend.driver, spec.uuid, PowerState.RUNNING) == PowerState.RUNNING
    assert backend.driver.domain_reboot(spec.uuid).power_state == PowerState.RUNNING
    assert backend.driver.domain_reboot(spec.uuid, hard=True).power_state == PowerState.RUNNING
    backend.driver.domain_stop(spec.uuid)  # soft: an ACPI request; SeaBIOS ignores it, so we then power off
    assert backend.driver.domain_stop(spec.uuid, hard=True).power_state == PowerState.SHUTOFF
    assert backend.driver.domain_stop(spec.uuid, hard=True).power_state == PowerState.SHUTOFF  # no-op
    backend.driver.domain_delete(spec.uuid)
    backend.driver.domain_delete(spec.uuid)  # no-op when gone
    with pytest.raises(DriverNotFound) as exc:
        backend.driver.domain_get(spec.uuid)
    assert exc.value.code == "domain_not_found"


def test_delete_of_a_running_domain_powers_it_off(backend):
    spec = backend.spec()
    backend.driver.domain_define(spec)
    backend.driver.domain_start(spec.uuid)
    backend.driver.domain_delete(spec.uuid)
    assert spec.uuid not in {d.uuid for d in backend.driver.domain_list()}


def _serial_log_kept(backend: Backend, domain_uuid) -> bool:
    if backend.name == "fake":
        return domain_uuid in backend.driver.host.console
    return Path(backend.driver.seed_dir, f"{domain_uuid}-serial.log").exists()


def test_delete_removes_the_serial_console_log(backend):
    """The serial log stays on the host only while the domain exists: the delete removes it, and again is a no-op
    (libvirt's test driver writes no log, so the test writes it where a domain's `<log file>` points)."""
    spec = backend.spec()
    backend.driver.domain_define(spec)
    backend.driver.domain_start(spec.uuid)
    if backend.name == "libvirt-test":
        Path(backend.driver.seed_dir, f"{spec.uuid}-serial.log").write_text("vm login: \n")
    assert _wait(backend.driver, spec.uuid, PowerState.RUNNING) == PowerState.RUNNING
    assert _serial_log_kept(backend, spec.uuid)
    backend.driver.domain_delete(spec.uuid)
    assert not _serial_log_kept(backend, spec.uuid)
    backend.driver.domain_delete(spec.uuid)
    assert not _serial_log_kept(backend, spec.uuid)


def test_reboot_of_a_stopped_domain_is_a_conflict(backend):
    spec = backend.spec()
    backend.driver.domain_define(spec)
    with pytest.raises(DriverConflict) as exc:
        backend.driver.domain_reboot(spec.uuid)
    assert exc.value.code == "domain_not_running"


def test_missing_domain_is_not_found(backend):
    for call in (backend.driver.domain_start, backend.driver.domain_stop, backend.driver.domain_get):
        with pytest.raises(DriverNotFound):
            call(uuid.uuid4())


def test_unreachable_host_is_transient(backend):
    with pytest.raises(DriverTransientError) as exc:
        backend.unreachable.domain_list()
    assert exc.value.code == "host_unreachable"


def test_invalid_pci_address_is_terminal(backend):
    with pytest.raises(DriverError) as exc:
        backend.driver.domain_define(backend.spec(hostdevs=(PciHostdev("3b:00.0"),)))
    assert exc.value.code == "invalid_pci_address"
    assert not isinstance(exc.value, DriverTransientError)


def test_console_log_is_text(backend):
    spec = backend.spec()
    backend.driver.domain_define(spec)
    backend.driver.domain_start(spec.uuid)
    assert isinstance(backend.driver.console_log(spec.uuid), str)
    backend.driver.domain_delete(spec.uuid)
