"""Which compute driver serves a host: `settings.DRIVERS["compute"]` ("module:Class", default the libvirt
driver) instantiated once per libvirt URI per process, so every task in a worker shares one connection per host
(libvirt's `test:///default` keeps its state only while a connection is open)."""
from __future__ import annotations

import importlib
import threading

import environ
from django.conf import settings

from apps.core.drivers import DriverError

from ..errors import Code

DEFAULT = "apps.compute.drivers.libvirt:LibvirtDriver"
_drivers: dict[tuple[str, str], object] = {}
_lock = threading.Lock()


def _driver_class():
    path = getattr(settings, "DRIVERS", {}).get("compute", DEFAULT)
    module, _, name = path.partition(":")
    return path, getattr(importlib.import_module(module), name)


def driver_for_uri(uri: str):
    path, cls = _driver_class()
    with _lock:
        drv = _drivers.get((path, uri))
        if drv is None:
            seed_dir = environ.Env().str("COMPUTE_SEED_DIR", default="")
            kwargs = {"seed_dir": seed_dir} if seed_dir else {}
            drv = _drivers[(path, uri)] = cls(uri, **kwargs)
        return drv


def driver_for_host(host):
    """The driver of `host` (an `inventory.Host`). Raises `DriverError` when the host has no libvirt URI."""
    if not host.libvirt_uri:
        raise DriverError(f"host {host.name} has no libvirt URI", code=Code.NO_HOST_URI)
    return driver_for_uri(host.libvirt_uri)


def forget_drivers() -> None:
    with _lock:
        _drivers.clear()
