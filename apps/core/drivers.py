"""Driver exceptions every adapter raises (libvirt, Ironic, OVN, OpenSM, UFM, NVML) and a small registry.

Drivers import nothing from models, services or api: typed frozen dataclasses in, these exceptions out.
- `DriverTransientError`: retry with backoff (connection refused, timeout, busy).
- `DriverNotFound`: the backend object does not exist.
- `DriverConflict`: the backend object exists in an incompatible state.
- `DriverError`: anything else; terminal.
"""
from __future__ import annotations

import importlib
from typing import Any

from django.conf import settings


class DriverError(Exception):
    """Terminal driver failure. `code` is a stable snake_case string recorded on the Operation."""

    code = "driver_error"

    def __init__(self, message: str = "", *, code: str | None = None):
        super().__init__(message)
        if code:
            self.code = code


class DriverTransientError(DriverError):
    code = "driver_unavailable"


class DriverNotFound(DriverError):
    code = "driver_not_found"


class DriverConflict(DriverError):
    code = "driver_conflict"


def load_driver(port: str, default: str, **kwargs: Any):
    """Instantiate the driver configured for `port` in `settings.DRIVERS[port]` ("module.path:Class")."""
    path = getattr(settings, "DRIVERS", {}).get(port, default)
    module_name, _, cls_name = path.partition(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    return cls(**kwargs)
