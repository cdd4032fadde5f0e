"""In-memory fencing driver for the layers above the driver (tests, the fault replay, the demo).

Every BMC address starts powered ``on``. `power_off` turns it ``off`` at once, unless the address was told to
misbehave: `FakeFenceDriver.refuse(address)` (the BMC answers with an error), `unreachable(address)` (it never
answers) or `stuck(address)` (it accepts the request and keeps reporting ``on``). `reset()` forgets it all.
"""

from __future__ import annotations

from .base import POWER_OFF, BmcTarget, DriverError, DriverTransientError


class FakeFenceDriver:
    _power: dict[str, str] = {}
    _mode: dict[str, str] = {}
    calls: list[tuple[str, str]] = []

    @classmethod
    def reset(cls) -> None:
        cls._power.clear()
        cls._mode.clear()
        cls.calls.clear()

    @classmethod
    def refuse(cls, address: str) -> None:
        cls._mode[address] = "refuse"

    @classmethod
    def unreachable(cls, address: str) -> None:
        cls._mode[address] = "unreachable"

    @classmethod
    def stuck(cls, address: str) -> None:
        cls._mode[address] = "stuck"

    @classmethod
    def power_on(cls, address: str) -> None:
        cls._power[address] = "on"

    def _check(self, target: BmcTarget) -> str:
        mode = self._mode.get(target.address, "")
        if mode == "unreachable":
            raise DriverTransientError(f"BMC {target.address} did not answer", code="bmc_unreachable")
        if mode == "refuse":
            raise DriverError(f"BMC {target.address} refused: 401 Unauthorized", code="bmc_refused")
        return mode

    def power_off(self, target: BmcTarget) -> None:
        mode = self._check(target)
        self.calls.append(("power_off", target.address))
        if mode != "stuck":
            self._power[target.address] = POWER_OFF

    def power_state(self, target: BmcTarget) -> str:
        self._check(target)
        self.calls.append(("power_state", target.address))
        return self._power.get(target.address, "on")
