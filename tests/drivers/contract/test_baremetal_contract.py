"""The bare-metal driver contract: one suite, run against the fake driver and a real Ironic standalone
(fake-hardware type; ironic_standalone.py starts it, once per session)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from apps.baremetal.drivers.base import (
    BaremetalDriver,
    ConfigDrive,
    DeployRequest,
    EnrollRequest,
    NodeFailed,
    PowerAction,
    PowerState,
    ProvisionState,
    automated_cleaning_runs,
)
from apps.baremetal.drivers.fake import FakeBaremetalDriver
from apps.core.drivers import DriverConflict, DriverNotFound, DriverTransientError

from .ironic_standalone import ironic_endpoint  # noqa: F401  (session fixture)

P = ProvisionState


@dataclass
class Backend:
    name: str
    driver: BaremetalDriver

    def instance_info(self, node_id: str) -> dict[str, Any]:
        if isinstance(self.driver, FakeBaremetalDriver):
            return self.driver.instance_info(node_id)
        return dict(self.driver.api.get_node(node_id).instance_info or {})


@pytest.fixture(params=["fake", pytest.param("ironic", marks=pytest.mark.slow)])
def backend(request) -> Backend:
    if request.param == "fake":
        yield Backend("fake", FakeBaremetalDriver())
        return
    endpoint = request.getfixturevalue("ironic_endpoint")  # skips before the import when Ironic is missing
    from apps.baremetal.drivers.ironic import IronicDriver

    driver = IronicDriver(endpoint, default_timeout=60, poll_interval=0.25)
    yield Backend("ironic", driver)
    driver.close()


@pytest.fixture
def enrolled(backend):
    """A fresh fake-hardware node (in `enroll`), deleted afterwards whatever state the test left it in."""
    suffix = uuid.uuid4().hex[:8]
    mac = f"52:54:00:{suffix[:2]}:{suffix[2:4]}:{suffix[4:6]}"
    node = backend.driver.enroll(
        EnrollRequest(
            name=f"contract-{suffix}",
            driver="fake-hardware",
            resource_class="baremetal.gpu-h100x8",
            properties={"cpus": 112, "memory_mb": 2097152, "local_gb": 3500, "cpu_arch": "x86_64"},
            macs=(mac.upper(),),
        )
    )
    yield node
    try:
        backend.driver.set_maintenance(node.id, True, "contract cleanup")
    except DriverNotFound:
        return  # the test deleted it
    backend.driver.delete(node.id)


def _deploy_request(
    instance_id: str, image: str = "http://images.invalid/ubuntu-24.04.qcow2"
) -> DeployRequest:
    return DeployRequest(
        instance_id=instance_id,
        image_source=image,
        image_checksum="sha256:" + "ab" * 32,
        root_gb=100,
        config_drive=ConfigDrive(
            meta_data={
                "uuid": instance_id,
                "hostname": "bm-contract",
                "public_keys": {"k": "ssh-ed25519 AAAAC3Nz contract"},
            },
            user_data="#cloud-config\nhostname: bm-contract\n",
            network_data={"links": [], "networks": [], "services": []},
        ),
    )


def test_enroll_creates_the_node_and_its_ports_and_is_idempotent(backend, enrolled):
    assert enrolled.state.provision == P.ENROLL
    assert enrolled.driver == "fake-hardware" and enrolled.resource_class == "baremetal.gpu-h100x8"
    assert enrolled.properties["cpus"] == 112 and len(enrolled.macs) == 1
    assert enrolled.macs[0] == enrolled.macs[0].lower()
    again = backend.driver.enroll(
        EnrollRequest(name=enrolled.name, driver="fake-hardware", macs=enrolled.macs)
    )
    assert again.id == enrolled.id and again.macs == enrolled.macs  # a retried enroll: same node, no new port
    assert backend.driver.get(enrolled.name).id == enrolled.id  # addressed by name too
    assert enrolled.id in {n.id for n in backend.driver.list()}
    with pytest.raises(DriverConflict):
        backend.driver.enroll(EnrollRequest(name=enrolled.name, driver="redfish"))


def test_a_running_service_is_available(backend):
    assert backend.driver.available() is True


def test_unknown_node_is_not_found_and_delete_of_it_is_a_no_op(backend):
    missing = str(uuid.uuid4())
    with pytest.raises(DriverNotFound):
        backend.driver.get(missing)
    with pytest.raises(DriverNotFound):
        backend.driver.manage(missing)
    backend.driver.delete(missing)


def test_verbs_the_state_refuses_are_conflicts(backend, enrolled):
    with pytest.raises(DriverConflict):
        backend.driver.provide(enrolled.id)  # enroll -> provide: not in Ironic's machine
    with pytest.raises(DriverConflict):
        backend.driver.deploy(enrolled.id, _deploy_request(str(uuid.uuid4())))
    assert backend.driver.get(enrolled.id).state.provision == P.ENROLL


def test_full_lifecycle(backend, enrolled):
    d = backend.driver
    assert d.manage(enrolled.id).state.provision == P.MANAGEABLE
    assert d.manage(enrolled.id).state.provision == P.MANAGEABLE  # again: a no-op

    found = d.inspect(enrolled.id)
    assert (found.cpus, found.memory_mb, found.local_gb, found.cpu_arch) == (112, 2097152, 3500, "x86_64")
    assert found.macs == enrolled.macs
    assert d.get(enrolled.id).state.provision == P.MANAGEABLE

    assert d.clean(enrolled.id, [{"interface": "power", "step": "power_off"}]).state.provision == P.MANAGEABLE
    assert d.provide(enrolled.id).state.provision == P.AVAILABLE
    assert d.provide(enrolled.id).state.provision == P.AVAILABLE  # again: a no-op

    instance = str(uuid.uuid4())
    node = d.deploy(enrolled.id, _deploy_request(instance))
    assert node.state.provision == P.ACTIVE and node.instance_id == instance and not node.state.last_error
    info = backend.instance_info(enrolled.id)
    assert info["image_source"].endswith("ubuntu-24.04.qcow2") and info["root_gb"] == 100
    assert info["image_os_hash_algo"] == "sha256" and "configdrive" in info
    assert d.deploy(enrolled.id, _deploy_request(instance)).state.provision == P.ACTIVE  # a retried step
    with pytest.raises(DriverConflict):
        d.deploy(enrolled.id, _deploy_request(str(uuid.uuid4())))  # another instance: taken

    assert d.set_power(enrolled.id, PowerAction.OFF).state.power == PowerState.OFF
    assert d.set_power(enrolled.id, PowerAction.ON).state.power == PowerState.ON
    assert d.set_power(enrolled.id, PowerAction.REBOOT).state.power == PowerState.ON

    rebuilt = d.rebuild(enrolled.id, _deploy_request(instance, image="http://images.invalid/rocky-9.qcow2"))
    assert rebuilt.state.provision == P.ACTIVE and rebuilt.instance_id == instance
    assert backend.instance_info(enrolled.id)["image_source"].endswith("rocky-9.qcow2")

    with pytest.raises(DriverConflict):
        d.delete(enrolled.id)  # active: undeploy first

    gone = d.undeploy(enrolled.id)
    assert gone.state.provision == P.AVAILABLE and gone.instance_id == ""
    assert d.undeploy(enrolled.id).state.provision == P.AVAILABLE  # again: a no-op
    d.delete(enrolled.id)
    with pytest.raises(DriverNotFound):
        d.get(enrolled.id)


@pytest.mark.parametrize("automated_clean", [True, False])
def test_the_nodes_automated_clean_decides_cleaning_and_history_records_it(backend, enrolled, automated_clean):
    """The conductor's own option is off (scripts/ironic-standalone.sh): the node's field alone decides whether
    provide and undeploy clean, and the history shows each cleaning with the steps the conductor ran."""
    d = backend.driver
    assert enrolled.automated_clean is None
    again = d.enroll(EnrollRequest(name=enrolled.name, driver="fake-hardware", automated_clean=automated_clean))
    assert again.id == enrolled.id and d.get(enrolled.id).automated_clean is automated_clean
    d.manage(enrolled.id)
    d.provide(enrolled.id)
    d.deploy(enrolled.id, _deploy_request(str(uuid.uuid4())))
    d.undeploy(enrolled.id)
    events = d.history(enrolled.id)
    assert [e.created_at for e in events] == sorted(e.created_at for e in events)
    assert [e.event_type for e in events if e.event_type.startswith("deployment_")] == [
        "deployment_start", "deployment_end"]
    runs = automated_cleaning_runs(events)
    if automated_clean:  # on provide, then after the undeploy
        assert [(r.result, r.steps) for r in runs] == [("succeeded", ("vendor.log_passthrough",))] * 2
        assert all(r.started_at <= r.finished_at for r in runs)
    else:
        assert runs == []


def test_maintenance_on_and_off(backend, enrolled):
    d = backend.driver
    d.manage(enrolled.id)
    on = d.set_maintenance(enrolled.id, True, "replacing a DIMM")
    assert on.state.maintenance and on.state.maintenance_reason == "replacing a DIMM"
    assert on.state.provision == P.MANAGEABLE
    off = d.set_maintenance(enrolled.id, False)
    assert not off.state.maintenance and off.state.maintenance_reason == ""
    assert d.provide(enrolled.id).state.provision == P.AVAILABLE


def test_clean_failure_is_reported_and_recovered(backend, enrolled):
    d = backend.driver
    d.manage(enrolled.id)
    with pytest.raises(NodeFailed) as failed:
        d.clean(enrolled.id, [{"interface": "deploy", "step": "no_such_step"}])
    assert failed.value.code == "baremetal_failed_state"
    assert failed.value.node.state.provision == P.CLEAN_FAILED
    assert "no_such_step" in failed.value.node.state.last_error
    assert d.get(enrolled.id).state.failed

    recovered = d.recover(enrolled.id)
    assert recovered.state.provision == P.MANAGEABLE and not recovered.state.maintenance
    assert d.recover(enrolled.id).state.provision == P.MANAGEABLE  # not failed: unchanged
    assert d.provide(enrolled.id).state.provision == P.AVAILABLE


def test_not_waiting_returns_at_once_and_wait_for_finishes(backend, enrolled):
    d = backend.driver
    d.manage(enrolled.id, wait=False)
    if hasattr(d, "wait_for"):
        assert d.wait_for(enrolled.id, P.MANAGEABLE, timeout=30).state.provision == P.MANAGEABLE
    assert d.get(enrolled.id).state.provision in {P.VERIFYING, P.MANAGEABLE}


@pytest.mark.slow
def test_ironic_unreachable_is_transient():
    from apps.baremetal.drivers.ironic import IronicDriver

    driver = IronicDriver("http://127.0.0.1:9", connect_retries=0)
    with pytest.raises(DriverTransientError) as err:
        driver.get("any")
    assert err.value.code == "baremetal_unreachable"
    assert driver.available() is False  # what the API's 503 `baremetal_unavailable` asks
