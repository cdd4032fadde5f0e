"""The bare-metal driver this process uses: `settings.DRIVERS["baremetal"]` ("module:Class"; default the Ironic
driver at `BAREMETAL_IRONIC_ENDPOINT`), built once per process and shared by every task (one SDK connection)."""
from __future__ import annotations

import threading

from apps.core.drivers import load_driver

from .. import conf

DEFAULT = "apps.baremetal.drivers.ironic:IronicDriver"
_lock = threading.Lock()
_driver: list = []


def baremetal_driver():
    with _lock:
        if not _driver:
            from django.conf import settings

            path = getattr(settings, "DRIVERS", {}).get("baremetal", DEFAULT)
            kwargs = {"endpoint": conf.ironic_endpoint()} if path == DEFAULT else {}
            _driver.append(load_driver("baremetal", DEFAULT, **kwargs))
        return _driver[0]


def forget_driver() -> None:
    with _lock:
        _driver.clear()
