"""The mdev (vGPU) creation path of `LibvirtDriver`, on the test driver's node devices (data/gpu-node.xml).

libvirt's test driver lists mdev types and existing mdevs but cannot create one (`nodeDeviceCreateXML` of an
mdev fails with "Device is not a fibre channel HBA"): the tests pin that a create
reaches libvirt as a terminal error, and everything before it (idempotent lookup, type checks) works.
"""
from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET

import pytest

from apps.compute.drivers.base import MdevHostdev, MdevTypeInfo
from apps.compute.drivers.libvirt import LibvirtDriver
from apps.compute.drivers.libvirt.xml import mdev_xml, nodedev_name
from apps.core.drivers import DriverError, DriverNotFound, DriverTransientError

EXISTING = "4b20d080-1b54-4048-85b3-a6a62d165c01"
GPU = "0000:3b:00.0"


@pytest.fixture
def driver(test_node_uri, tmp_path):
    return LibvirtDriver(test_node_uri, seed_dir=str(tmp_path))


def test_mdev_types_of_a_parent(driver):
    assert driver.mdev_types(GPU) == [MdevTypeInfo("nvidia-700", "GRID A100DX-3-40C", 2),
                                      MdevTypeInfo("nvidia-701", "GRID A100DX-7-80C", 0)]
    assert driver.mdev_types("0000:9b:00.0") == []


def test_mdev_types_of_a_missing_parent_is_not_found(driver):
    with pytest.raises(DriverNotFound) as exc:
        driver.mdev_types("0000:aa:00.0")
    assert exc.value.code == "device_not_found"


def test_create_finds_an_existing_mdev_by_uuid(driver):
    assert driver.mdev_create(MdevHostdev(EXISTING, "nvidia-700", GPU)) == (
        "mdev_4b20d080_1b54_4048_85b3_a6a62d165c01")


def test_create_of_a_type_the_parent_lacks_is_terminal(driver):
    with pytest.raises(DriverError) as exc:
        driver.mdev_create(MdevHostdev(str(uuid.uuid4()), "nvidia-999", GPU))
    assert exc.value.code == "mdev_type_unsupported"


def test_create_of_an_exhausted_type_is_terminal(driver):
    with pytest.raises(DriverError) as exc:
        driver.mdev_create(MdevHostdev(str(uuid.uuid4()), "nvidia-701", GPU))
    assert exc.value.code == "mdev_type_exhausted"


def test_create_reaches_libvirt_node_device_api(driver):
    with pytest.raises(DriverError) as exc:
        driver.mdev_create(MdevHostdev(str(uuid.uuid4()), "nvidia-700", GPU))
    assert not isinstance(exc.value, DriverTransientError)
    assert "fibre channel" in str(exc.value)  # the test driver's only creatable node device is a vHBA


def test_delete_of_a_missing_mdev_is_a_noop(driver):
    driver.mdev_delete(str(uuid.uuid4()))


def test_mdev_xml_names_parent_type_and_uuid():
    u = str(uuid.uuid4())
    root = ET.fromstring(mdev_xml(MdevHostdev(u, "nvidia-700", GPU)))
    assert root.findtext("parent") == "pci_0000_3b_00_0"
    assert root.find("capability[@type='mdev']/type").get("id") == "nvidia-700"
    assert root.findtext("capability[@type='mdev']/uuid") == u
    assert nodedev_name("0000:9B:00.4") == "pci_0000_9b_00_4"
