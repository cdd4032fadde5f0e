"""The bare-metal driver port: what the control plane asks of a provisioning service (OpenStack Ironic), in
typed frozen dataclasses.

Drivers import nothing from models, services or api. They raise only `apps.core.drivers` exceptions:
- `DriverTransientError` (code `baremetal_unreachable`, `baremetal_timeout`): the service did not answer, or a
  node did not reach the state in time; retry or wait longer.
- `DriverNotFound`: no node with that id or name.
- `DriverConflict` (code `baremetal_conflict`, `baremetal_locked`, `baremetal_invalid_transition`): the node exists
  but is in a state that refuses the request (a name taken, another request holds the node's lock, a verb its
  provision state does not allow).
- `NodeFailed` (a `DriverError`, code `baremetal_failed_state`): the node landed in a failed provision state
  (`deploy failed`, `clean failed`, `inspect failed`, `error`, ...) while we waited; `.node` is what it looked like.
- `DriverError`: anything else; terminal (bad driver_info, a rejected request body).

Nodes are addressed by the provisioning service's id (Ironic's node UUID) or by name. The state machine and its
verbs are Ironic's (docs.openstack.org/ironic/latest/contributor/states.html); docs/bare-metal.md summarises it.
"""

from __future__ import annotations

import ast
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from apps.core.drivers import DriverConflict, DriverError, DriverNotFound, DriverTransientError

__all__ = [
    "BaremetalDriver",
    "CleaningRun",
    "ConfigDrive",
    "DeployRequest",
    "DriverConflict",
    "DriverError",
    "DriverNotFound",
    "DriverTransientError",
    "EnrollRequest",
    "InspectionData",
    "Node",
    "NodeEvent",
    "NodeFailed",
    "NodeState",
    "PowerAction",
    "PowerState",
    "ProvisionState",
    "FAILED_STATES",
    "FLOW_PREFIXES",
    "STABLE_STATES",
    "automated_cleaning_runs",
]


class ProvisionState(enum.StrEnum):
    """Ironic's provision states, spelled as its API spells them."""

    ENROLL = "enroll"
    VERIFYING = "verifying"
    MANAGEABLE = "manageable"
    INSPECTING = "inspecting"
    INSPECT_WAIT = "inspect wait"
    INSPECT_FAILED = "inspect failed"
    CLEANING = "cleaning"
    CLEAN_WAIT = "clean wait"
    CLEAN_FAILED = "clean failed"
    AVAILABLE = "available"
    DEPLOYING = "deploying"
    DEPLOY_WAIT = "wait call-back"
    DEPLOY_FAILED = "deploy failed"
    ACTIVE = "active"
    DELETING = "deleting"
    ERROR = "error"
    ADOPTING = "adopting"
    ADOPT_FAILED = "adopt failed"
    RESCUING = "rescuing"
    RESCUE_WAIT = "rescue wait"
    RESCUE_FAILED = "rescue failed"
    RESCUE = "rescue"
    UNRESCUING = "unrescuing"
    UNRESCUE_FAILED = "unrescue failed"
    SERVICING = "servicing"
    SERVICE_WAIT = "service wait"
    SERVICE_FAILED = "service failed"
    UNKNOWN = "unknown"  # a state this code does not know (a newer Ironic); never a target

    @classmethod
    def parse(cls, value: str | None) -> ProvisionState:
        try:
            return cls(value or "")
        except ValueError:
            return cls.UNKNOWN


# States a node rests in until someone acts; a wait ends in one of these.
STABLE_STATES = frozenset(
    {
        ProvisionState.ENROLL,
        ProvisionState.MANAGEABLE,
        ProvisionState.AVAILABLE,
        ProvisionState.ACTIVE,
        ProvisionState.RESCUE,
    }
)
FAILED_STATES = frozenset(
    {
        ProvisionState.INSPECT_FAILED,
        ProvisionState.CLEAN_FAILED,
        ProvisionState.DEPLOY_FAILED,
        ProvisionState.ERROR,
        ProvisionState.ADOPT_FAILED,
        ProvisionState.RESCUE_FAILED,
        ProvisionState.UNRESCUE_FAILED,
        ProvisionState.SERVICE_FAILED,
    }
)


class PowerState(enum.StrEnum):
    """Observed power state (Ironic's `power_state`: "power on", "power off", null while unknown)."""

    ON = "on"
    OFF = "off"
    UNKNOWN = "unknown"

    @classmethod
    def parse(cls, value: str | None) -> PowerState:
        return {"power on": cls.ON, "power off": cls.OFF}.get(value or "", cls.UNKNOWN)


class PowerAction(enum.StrEnum):
    ON = "on"
    OFF = "off"
    REBOOT = "reboot"


@dataclass(frozen=True)
class NodeState:
    """Where a node is: provision state and the one it is moving to, power, maintenance and the last error."""

    provision: ProvisionState
    power: PowerState = PowerState.UNKNOWN
    target_provision: ProvisionState | None = None
    target_power: PowerState | None = None
    maintenance: bool = False
    maintenance_reason: str = ""
    last_error: str = ""

    @property
    def failed(self) -> bool:
        return self.provision in FAILED_STATES

    @property
    def stable(self) -> bool:
        return self.failed or (self.target_provision is None and self.provision in STABLE_STATES)


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class EnrollRequest:
    """A node to enroll. `driver` is Ironic's hardware type (`redfish`, `ipmi`, `fake-hardware`); `driver_info`
    carries the BMC address and credentials (secrets: never logged, never returned by `Node`); `interfaces`
    overrides hardware interfaces (`{"deploy": "ramdisk", "boot": "redfish-virtual-media"}`); `macs` become the
    node's ports (its NICs' MAC addresses, lower case). `automated_clean` is Ironic's per-node switch (the node's
    `automated_clean` field): True runs automated cleaning on `provide` and after every undeploy whatever the
    conductor's `[conductor]automated_clean` option says, False skips it, None follows that option."""

    name: str
    driver: str
    driver_info: Mapping[str, Any] = field(default_factory=dict)
    resource_class: str = ""
    properties: Mapping[str, Any] = field(default_factory=dict)
    interfaces: Mapping[str, str] = field(default_factory=dict)
    macs: tuple[str, ...] = ()
    automated_clean: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "driver_info", _frozen(self.driver_info))
        object.__setattr__(self, "properties", _frozen(self.properties))
        object.__setattr__(self, "interfaces", _frozen(self.interfaces))
        object.__setattr__(self, "macs", tuple(m.lower() for m in self.macs))


@dataclass(frozen=True)
class Node:
    """A node as the provisioning service sees it. `instance_id` is our instance's UUID while deployed;
    `automated_clean` the node's own cleaning switch (see `EnrollRequest`; None: the conductor's option)."""

    id: str
    name: str
    driver: str
    state: NodeState
    resource_class: str = ""
    properties: Mapping[str, Any] = field(default_factory=dict)
    macs: tuple[str, ...] = ()
    instance_id: str = ""
    automated_clean: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", _frozen(self.properties))


@dataclass(frozen=True)
class NodeEvent:
    """One entry of Ironic's node history (API 1.78): `created_at` in Ironic's clock (ISO 8601, UTC),
    `severity` `INFO` or `ERROR`, `event_type` (`automated_cleaning_start`, `automated_cleaning_end`,
    `deployment_start`, ..., or a state name for an error) and the conductor's text."""

    id: str
    created_at: str
    event_type: str
    severity: str
    event: str


# The conductor's step-flow records (`[conductor]record_step_flows_in_history`, on by default in Ironic 39):
# "Starting automated cleaning with steps=[...]" and "Automated Cleaning completed successfully with steps=[...]" or
# "Automated Cleaning aborted at step 'x' with steps=[...]" (severity ERROR). Steps are Python reprs of dicts.
FLOW_PREFIXES = ("automated_cleaning_", "manual_cleaning_", "deployment_", "servicing_")


@dataclass(frozen=True)
class CleaningRun:
    """One automated cleaning Ironic's history shows: when it started and ended (Ironic's clock), the clean steps
    the conductor chose (`interface.step`), and how it ended: `succeeded`, `failed` (`error` names the step) or
    `running` (no end recorded yet)."""

    started_at: str
    finished_at: str | None
    steps: tuple[str, ...]
    result: str
    error: str = ""


def _flow_steps(text: str) -> tuple[str, ...]:
    _, sep, tail = text.partition("steps=")
    if not sep:
        return ()
    try:
        steps = ast.literal_eval(tail.strip())
    except (ValueError, SyntaxError):
        return ()
    return tuple(f"{s.get('interface')}.{s.get('step')}" for s in steps if isinstance(s, dict))


def automated_cleaning_runs(events: Sequence[NodeEvent]) -> list[CleaningRun]:
    """The automated cleanings recorded in `events` (oldest first), in order. An end without a start (history
    pruned) is ignored."""
    runs: list[CleaningRun] = []
    for ev in events:
        if ev.event_type == "automated_cleaning_start":
            runs.append(CleaningRun(started_at=ev.created_at, finished_at=None, steps=_flow_steps(ev.event),
                                    result="running"))
        elif ev.event_type == "automated_cleaning_end" and runs and runs[-1].result == "running":
            failed = ev.severity.upper() == "ERROR" or " aborted " in ev.event
            runs[-1] = CleaningRun(started_at=runs[-1].started_at, finished_at=ev.created_at,
                                   steps=runs[-1].steps or _flow_steps(ev.event),
                                   result="failed" if failed else "succeeded", error=ev.event if failed else "")
    return runs


@dataclass(frozen=True)
class InspectionData:
    """What inspection found: the scheduling properties, the NICs' MACs and (where the inspector stored one) the
    raw inventory."""

    cpus: int | None = None
    cpu_arch: str = ""
    memory_mb: int | None = None
    local_gb: int | None = None
    macs: tuple[str, ...] = ()
    inventory: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inventory", _frozen(self.inventory))


@dataclass(frozen=True)
class ConfigDrive:
    """The config drive Ironic builds and attaches (cloud-init's ConfigDrive/OpenStack format): `meta_data`
    (`uuid`, `hostname`, `public_keys`, ...), `user_data` (cloud-config or a script; at most 64 KiB here),
    `network_data` (OpenStack network_data.json)."""

    meta_data: Mapping[str, Any] = field(default_factory=dict)
    user_data: str = ""
    network_data: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.user_data.encode()) > USER_DATA_MAX_BYTES:
            raise ValueError(f"user_data is over {USER_DATA_MAX_BYTES} bytes")
        object.__setattr__(self, "meta_data", _frozen(self.meta_data))
        object.__setattr__(self, "network_data", _frozen(self.network_data))

    def as_ironic(self) -> dict[str, Any]:
        body: dict[str, Any] = {"meta_data": dict(self.meta_data)}
        if self.user_data:
            body["user_data"] = self.user_data
        if self.network_data:
            body["network_data"] = dict(self.network_data)
        return body


# Ironic stores the config drive in the node's instance_info (a database column); 64 KiB of user data keeps it
# small, and is what Nova accepts (its user_data column is MEDIUMTEXT but its API caps the body at 65535 bytes).
USER_DATA_MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class DeployRequest:
    """Deploy (or rebuild) `instance_id` onto a node. `image_source` is the image URL (or a Glance id when Ironic
    has one), `image_checksum` its checksum (`sha256:...` or bare md5/sha hex); `root_gb` the root partition size;
    `boot_iso` for the ramdisk deploy interface; `instance_info` extra keys passed through verbatim."""

    instance_id: str
    image_source: str = ""
    image_checksum: str = ""
    root_gb: int | None = None
    boot_iso: str = ""
    config_drive: ConfigDrive | None = None
    instance_info: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "instance_info", _frozen(self.instance_info))

    def as_instance_info(self) -> dict[str, Any]:
        info: dict[str, Any] = dict(self.instance_info)
        if self.image_source:
            info["image_source"] = self.image_source
        if self.image_checksum:
            algo, _, value = self.image_checksum.rpartition(":")
            if algo:
                info["image_os_hash_algo"], info["image_os_hash_value"] = algo, value
            else:
                info["image_checksum"] = value
        if self.root_gb is not None:
            info["root_gb"] = self.root_gb
        if self.boot_iso:
            info["boot_iso"] = self.boot_iso
        return info


class NodeFailed(DriverError):
    """A node landed in a failed provision state while the driver waited for another one."""

    code = "baremetal_failed_state"

    def __init__(self, node: Node, message: str = ""):
        super().__init__(
            message or f"node {node.name or node.id} is in {node.state.provision}: {node.state.last_error}"
        )
        self.node = node


@runtime_checkable
class BaremetalDriver(Protocol):
    """Every verb takes a node id or name. With `wait=True` (the default) it returns once the node rests in the
    verb's target state, raising `NodeFailed` when it lands in a failed state and `DriverTransientError`
    (`baremetal_timeout`) after `timeout` seconds; with `wait=False` it returns right after the request."""

    def enroll(self, request: EnrollRequest) -> Node:
        """Create the node (in `enroll`) and its ports. Idempotent by name: a node of that name with the same
        driver is returned with missing ports added and `automated_clean` set when the request names it; one with
        another driver is a `DriverConflict`."""

    def available(self) -> bool:
        """True when the provisioning service answers now (one cheap read, no retries; never raises)."""

    def get(self, node: str) -> Node: ...

    def list(self) -> list[Node]: ...

    def history(self, node: str) -> list[NodeEvent]:
        """The node's history, oldest first (Ironic keeps the last `[conductor]node_history_max_entries`, 300 by
        default). `DriverError` (`baremetal_rejected`) when the service has none (Ironic older than API 1.78)."""

    def delete(self, node: str) -> None:
        """Remove the node from the service. A missing node is a no-op; an active or deploying node is a
        `DriverConflict` (undeploy it, or set maintenance, first)."""

    def manage(self, node: str, *, wait: bool = True, timeout: float | None = None) -> Node:
        """enroll → verifying → manageable (checks the BMC); also the way out of `available`, `clean failed`
        and `inspect failed`."""

    def inspect(self, node: str, *, timeout: float | None = None) -> InspectionData:
        """manageable → inspecting → manageable; returns what was found (always waits)."""

    def provide(self, node: str, *, wait: bool = True, timeout: float | None = None) -> Node:
        """manageable → (cleaning →) available."""

    def clean(
        self, node: str, steps: list[dict[str, Any]], *, wait: bool = True, timeout: float | None = None
    ) -> Node:
        """Manual cleaning: manageable → cleaning → manageable, running `steps` (`{"interface", "step",
        "args"}`)."""

    def deploy(
        self, node: str, request: DeployRequest, *, wait: bool = True, timeout: float | None = None
    ) -> Node:
        """available → deploying → active, writing the image and the config drive."""

    def rebuild(
        self, node: str, request: DeployRequest, *, wait: bool = True, timeout: float | None = None
    ) -> Node:
        """active (or deploy failed) → deploying → active: redeploy the image, with a new config drive."""

    def undeploy(self, node: str, *, wait: bool = True, timeout: float | None = None) -> Node:
        """active / deploy failed / error → deleting → (cleaning →) available. Idempotent on `available`."""

    def set_power(
        self, node: str, action: PowerAction, *, wait: bool = True, timeout: float | None = None
    ) -> Node: ...

    def set_maintenance(self, node: str, on: bool, reason: str = "") -> Node: ...

    def recover(self, node: str, *, wait: bool = True, timeout: float | None = None) -> Node:
        """Bring a node out of a failed state to the nearest stable one: `clean failed` / `inspect failed` →
        manageable, `deploy failed` / `error` → available (undeploy), clearing the maintenance flag Ironic
        set for the failure. A node that is not failed is returned unchanged."""
