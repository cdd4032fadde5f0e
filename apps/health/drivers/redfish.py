"""The Redfish fencing driver, through `sushy` (the Redfish client OpenStack Ironic uses).

`power_off` posts ``ComputerSystem.Reset`` with ``ResetType: ForceOff`` to the host's system; `power_state`
reads the system again (a fresh GET) and answers its ``PowerState``. Each call opens its own session-less
connection (HTTP basic auth) with `HEALTH_FENCE_BMC_TIMEOUT_S`-style timeouts passed by the caller, and tries
no server-side retries itself: the fencing service owns the retry and the deadline (ADR 0218).
"""

from __future__ import annotations

import sushy
from sushy import auth as sushy_auth
from sushy import exceptions as sushy_exc

from .base import BmcTarget, DriverError, DriverTransientError

_STATES = {
    sushy.PowerState.ON: "on",
    sushy.PowerState.OFF: "off",
    sushy.PowerState.POWERING_ON: "powering on",
    sushy.PowerState.POWERING_OFF: "powering off",
    sushy.PowerState.PAUSED: "paused",
}


class RedfishFenceDriver:
    def __init__(self, *, timeout_s: float = 10.0):
        self.timeout_s = timeout_s

    def _system(self, target: BmcTarget):
        """The host's ComputerSystem: `system_id`, or the BMC's only one. Raises DriverError `bmc_no_system` (no such
        system, or several and none named) and what `_call` maps."""

        def find():
            root = sushy.Sushy(
                target.address.rstrip("/") + "/redfish/v1",
                auth=sushy_auth.BasicAuth(target.username, target.password),
                verify=target.verify_tls,
                server_side_retries=0,
                read_timeout=self.timeout_s,
                connect_timeout=self.timeout_s,
            )
            if target.system_id:
                try:
                    return root.get_system(target.system_id)
                except sushy_exc.ResourceNotFoundError as exc:
                    raise DriverError(f"BMC {target.address} has no system {target.system_id}",
                                      code="bmc_no_system") from exc
            members = root.get_system_collection().get_members()
            if len(members) != 1:
                raise DriverError(
                    f"BMC {target.address} has {len(members)} systems: name one (system_id)", code="bmc_no_system"
                )
            return members[0]

        return self._call(target, find)

    def _call(self, target: BmcTarget, fn):
        """`fn()` with sushy's errors mapped: no answer or a 5xx → DriverTransientError `bmc_unreachable` (the
        service retries until its deadline); any other refusal → DriverError `bmc_refused`."""
        try:
            return fn()
        except sushy_exc.ConnectionError as exc:
            raise DriverTransientError(f"BMC {target.address} did not answer: {exc}", code="bmc_unreachable") from exc
        except sushy_exc.ServerSideError as exc:
            raise DriverTransientError(f"BMC {target.address}: {exc}", code="bmc_unreachable") from exc
        except sushy_exc.SushyError as exc:
            raise DriverError(f"BMC {target.address} refused: {exc}", code="bmc_refused") from exc

    def power_off(self, target: BmcTarget) -> None:
        system = self._system(target)
        self._call(target, lambda: system.reset_system(sushy.ResetType.FORCE_OFF))

    def power_state(self, target: BmcTarget) -> str:
        system = self._system(target)  # a fresh GET of the system: its PowerState now

        def read():
            return _STATES.get(system.power_state, "unknown")

        return self._call(target, read)
