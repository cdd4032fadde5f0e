"""The fencing driver port: what the control plane asks of a host's BMC before it moves VMs off a silent host.

Drivers import nothing from models, services or api. They raise only `apps.core.drivers` exceptions:
- `DriverTransientError` (code `bmc_unreachable`): the BMC did not answer (connection refused, timeout, 5xx);
  the caller tries again until its own deadline.
- `DriverError` (code `bmc_refused`, `bmc_no_system`): the BMC answered and refused (bad credentials, no such
  system, a reset type it does not offer); terminal for this attempt.

Power states are Redfish's `ComputerSystem.PowerState` values lower-cased: ``on``, ``off``, ``powering on``,
``powering off``, ``paused``, or ``unknown`` when the BMC does not say. Only ``off`` confirms a fence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from apps.core.drivers import DriverError, DriverTransientError

__all__ = ["BmcTarget", "DriverError", "DriverTransientError", "FenceDriver", "POWER_OFF"]

POWER_OFF = "off"


@dataclass(frozen=True)
class BmcTarget:
    """Where and how to reach a host's BMC. `address`: the Redfish service's base URL (``https://10.0.0.17``);
    `system_id`: the ComputerSystem's path (``/redfish/v1/Systems/1``), empty for the BMC's only system;
    `verify_tls`: check the BMC's certificate (a BMC with a self-signed one needs False)."""

    address: str
    username: str = field(default="", repr=False)
    password: str = field(default="", repr=False)
    system_id: str = ""
    verify_tls: bool = True


@runtime_checkable
class FenceDriver(Protocol):
    def power_off(self, target: BmcTarget) -> None:
        """Ask the BMC to cut the host's power now (Redfish ``ForceOff``: no guest or OS shutdown). Returns when
        the BMC accepted the request; the power may go off later (read it back with `power_state`)."""

    def power_state(self, target: BmcTarget) -> str:
        """The host's power state as the BMC reads it now (see the module docstring)."""
