"""The fake bare-metal driver's own hooks (what the upper layers' tests use beyond the shared contract), and the
port's value types."""

import uuid

import pytest

from apps.baremetal.drivers.base import ConfigDrive, DeployRequest, EnrollRequest, NodeFailed, ProvisionState
from apps.baremetal.drivers.fake import FakeBaremetalDriver

P = ProvisionState


def _available(driver: FakeBaremetalDriver) -> str:
    node = driver.enroll(EnrollRequest(name=f"n-{uuid.uuid4().hex[:6]}", driver="fake-hardware"))
    driver.manage(node.id)
    driver.provide(node.id)
    return node.id


def test_injected_deploy_failure_lands_in_deploy_failed_and_recovers_to_available():
    driver = FakeBaremetalDriver()
    node = _available(driver)
    driver.fail_next(node, "deploy", "image checksum mismatch")
    with pytest.raises(NodeFailed) as failed:
        driver.deploy(node, DeployRequest(instance_id=str(uuid.uuid4())))
    assert failed.value.node.state.provision == P.DEPLOY_FAILED
    assert failed.value.node.state.last_error == "image checksum mismatch"
    recovered = driver.recover(node)
    assert recovered.state.provision == P.AVAILABLE and recovered.instance_id == ""
    assert driver.deploy(node, DeployRequest(instance_id=str(uuid.uuid4()))).state.provision == P.ACTIVE


def test_without_waiting_a_failure_is_in_the_state_not_raised():
    driver = FakeBaremetalDriver()
    node = _available(driver)
    driver.fail_next(node, "undeploy")
    driver.deploy(node, DeployRequest(instance_id=str(uuid.uuid4())))
    assert driver.undeploy(node, wait=False).state.provision == P.ERROR
    assert driver.recover(node).state.provision == P.AVAILABLE


def test_shared_state_across_driver_objects():
    shared: dict = {}
    node = _available(FakeBaremetalDriver(shared=shared))
    assert FakeBaremetalDriver(shared=shared).get(node).state.provision == P.AVAILABLE


def test_deploy_request_maps_to_ironic_instance_info_and_config_drive():
    req = DeployRequest(
        instance_id="i",
        image_source="http://x/img.qcow2",
        image_checksum="sha256:abc",
        root_gb=40,
        config_drive=ConfigDrive(meta_data={"uuid": "i"}, user_data="#!/bin/sh\n"),
    )
    assert req.as_instance_info() == {
        "image_source": "http://x/img.qcow2",
        "image_os_hash_algo": "sha256",
        "image_os_hash_value": "abc",
        "root_gb": 40,
    }
    assert DeployRequest(instance_id="i", image_checksum="d41d8cd9").as_instance_info() == {
        "image_checksum": "d41d8cd9"
    }
    assert req.config_drive.as_ironic() == {"meta_data": {"uuid": "i"}, "user_data": "#!/bin/sh\n"}
    with pytest.raises(ValueError):
        ConfigDrive(user_data="x" * (64 * 1024 + 1))
    with pytest.raises(TypeError):
        req.config_drive.meta_data["uuid"] = "other"  # frozen all the way down
