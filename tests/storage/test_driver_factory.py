"""`get_driver`: the storage driver class comes from `settings.DRIVERS["storage"]`, one instance per host URI."""
from __future__ import annotations

import pytest

from apps.storage.drivers import forget_drivers, get_driver
from apps.storage.drivers.fake import FakeStorageDriver
from apps.storage.drivers.libvirt import LibvirtStorageDriver


@pytest.fixture(autouse=True)
def _fresh():
    forget_drivers()
    yield
    forget_drivers()


def test_default_is_libvirt_and_cached_per_uri(settings):
    settings.DRIVERS = {}
    drv = get_driver("qemu+tls://gpu-1.example/system")
    assert isinstance(drv, LibvirtStorageDriver) and drv.uri == "qemu+tls://gpu-1.example/system"
    assert get_driver("qemu+tls://gpu-1.example/system") is drv
    assert get_driver("qemu+tls://gpu-2.example/system") is not drv


def test_setting_selects_the_fake(settings):
    settings.DRIVERS = {"storage": "apps.storage.drivers.fake:FakeStorageDriver"}
    drv = get_driver("fake://gpu-1")
    assert isinstance(drv, FakeStorageDriver) and drv.uri == "fake://gpu-1"
