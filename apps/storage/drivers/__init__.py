"""Storage drivers: `base` (the port), `libvirt` (production and contract tests), `fake` (unit tests).

`get_driver(uri)` picks the class from `settings.DRIVERS["storage"]` ("module:Class", default the libvirt
driver), as compute does with `DRIVERS["compute"]`, and keeps one instance per (class, host URI) per process.
"""
from __future__ import annotations

import threading

from django.conf import settings

from apps.core.drivers import load_driver

from .base import StorageDriver

DEFAULT = "apps.storage.drivers.libvirt:LibvirtStorageDriver"
_drivers: dict[tuple[str, str], StorageDriver] = {}
_lock = threading.Lock()


def get_driver(uri: str) -> StorageDriver:
    """The storage driver for the host with libvirt URI `uri` (e.g. ``qemu+tls://gpu-1/system``)."""
    path = getattr(settings, "DRIVERS", {}).get("storage", DEFAULT)
    with _lock:
        drv = _drivers.get((path, uri))
        if drv is None:
            drv = _drivers[(path, uri)] = load_driver("storage", DEFAULT, uri=uri)
        return drv


def forget_drivers() -> None:
    """Drop the cached instances (tests that switch `settings.DRIVERS`)."""
    with _lock:
        _drivers.clear()
