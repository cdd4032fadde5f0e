"""In-memory bare-metal driver for the layers above the driver (services, workflows, API tests).

It follows Ironic's state machine for the verbs of `base.BaremetalDriver`, the way Ironic's `fake-hardware`
type behaves (every step finishes at once, power follows the request), so the contract suite
(tests/drivers/contract/test_baremetal_contract.py) runs unchanged against both. Failures are injected with
`fail_next(node, verb)`; an unknown clean step also fails cleaning, as in Ironic. State is per instance unless a
`shared` dict is passed (so that several driver objects built by `load_driver` see the same nodes).

Automated cleaning follows Ironic's rule: it runs on `provide` and after an undeploy when the node's
`automated_clean` is True, or None and the conductor's option (`automated_clean`, False here as in
scripts/ironic-standalone.sh) is on; the node's history records it as Ironic 39 does (`automated_cleaning_start` /
`_end`, fake-hardware's one step `vendor.log_passthrough`), and every deploy as `deployment_start` / `_end`.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from .base import (
    DeployRequest,
    DriverConflict,
    DriverError,
    DriverNotFound,
    DriverTransientError,
    EnrollRequest,
    InspectionData,
    Node,
    NodeEvent,
    NodeFailed,
    NodeState,
    PowerAction,
    PowerState,
)
from .base import ProvisionState as P

# The manual clean steps `fake-hardware` accepts (Ironic's conductor-level power steps); anything else fails
# cleaning with `clean failed` ("node does not support this clean step"), as Ironic 39 does.
CLEAN_STEPS = {("power", "power_on"), ("power", "power_off"), ("power", "reboot")}

_ALLOWED = {  # verb -> provision states it may start from (Ironic's machine, the subset we drive)
    "manage": {P.ENROLL, P.AVAILABLE, P.CLEAN_FAILED, P.INSPECT_FAILED, P.ADOPT_FAILED},
    "inspect": {P.MANAGEABLE, P.INSPECT_FAILED},
    "provide": {P.MANAGEABLE},
    "clean": {P.MANAGEABLE},
    "deploy": {P.AVAILABLE},
    "rebuild": {P.ACTIVE, P.DEPLOY_FAILED, P.ERROR},
    "undeploy": {P.ACTIVE, P.DEPLOY_FAILED, P.ERROR},
}
_NO_OP = {"manage": {P.MANAGEABLE}, "provide": {P.AVAILABLE}, "undeploy": {P.AVAILABLE}}
_FAIL_STATE = {
    "manage": P.ENROLL,
    "inspect": P.INSPECT_FAILED,
    "provide": P.CLEAN_FAILED,
    "clean": P.CLEAN_FAILED,
    "deploy": P.DEPLOY_FAILED,
    "rebuild": P.DEPLOY_FAILED,
    "undeploy": P.ERROR,
}


_CLEAN_STEP = "{'step': 'log_passthrough', 'priority': 1, 'abortable': False, 'argsinfo': None, 'interface': 'vendor'}"
_DEPLOY_STEP = "{'step': 'deploy', 'priority': 100, 'abortable': True, 'argsinfo': None, 'interface': 'deploy'}"


class FakeBaremetalDriver:
    def __init__(self, shared: dict | None = None, automated_clean: bool = False, **_: Any):
        self._nodes: dict[str, dict[str, Any]] = shared if shared is not None else {}
        self.automated_clean = automated_clean  # the conductor's [conductor]automated_clean
        self.service_up = True  # test hook: False while the service "is starting" (`available` answers False,
        # every other call raises `baremetal_unreachable`, as the Ironic driver's do)
        self._lock = threading.Lock()
        self._fail: dict[tuple[str, str], str] = {}
        self._down: dict[str, int] = {}

    # --- test hooks ----------------------------------------------------------------------------------------
    def fail_next(self, node: str, verb: str, message: str = "injected failure") -> None:
        """The next `verb` on `node` lands in the failed state Ironic would use for it."""
        self._fail[(self._row(node, check=False)["id"], verb)] = message

    def bmc_down(self, node: str, calls: int) -> None:
        """The next `calls` requests about `node` raise `DriverTransientError` (`baremetal_unreachable`), as
        when its BMC or the provisioning service stops answering."""
        self._down[self._row(node, check=False)["id"]] = calls

    def set_hardware(self, node: str, **properties: Any) -> None:
        """What inspection of `node` will find from now on (`cpus`, `memory_mb`, `local_gb`, `cpu_arch`)."""
        self._row(node, check=False)["properties"].update(properties)

    # --- reads ---------------------------------------------------------------------------------------------
    def _answering(self) -> None:
        if not self.service_up:
            raise DriverTransientError("the provisioning service does not answer", code="baremetal_unreachable")

    def _row(self, node: str, check: bool = True) -> dict[str, Any]:
        if check:
            self._answering()
        row = self._nodes.get(node) or next((r for r in self._nodes.values() if r["name"] == node), None)
        if row is None:
            raise DriverNotFound(f"no bare-metal node {node!r}")
        if check and self._down.get(row["id"], 0) > 0:
            self._down[row["id"]] -= 1
            raise DriverTransientError(f"BMC of node {row['name']} does not answer", code="baremetal_unreachable")
        return row

    @staticmethod
    def _node(row: dict[str, Any]) -> Node:
        return Node(
            id=row["id"],
            name=row["name"],
            driver=row["driver"],
            state=row["state"],
            resource_class=row["resource_class"],
            properties=row["properties"],
            macs=row["macs"],
            instance_id=row["instance_id"],
            automated_clean=row["automated_clean"],
        )

    @staticmethod
    def _record(row: dict[str, Any], event_type: str, event: str, severity: str = "INFO") -> None:
        row["history"].append(NodeEvent(id=str(uuid.uuid4()), created_at=datetime.now(UTC).isoformat(),
                                        event_type=event_type, severity=severity, event=event))

    def _cleans(self, row: dict[str, Any]) -> bool:
        return bool(row["automated_clean"]) or (row["automated_clean"] is None and self.automated_clean)

    def history(self, node: str) -> list[NodeEvent]:
        return list(self._row(node)["history"])

    def available(self) -> bool:
        return self.service_up

    def get(self, node: str) -> Node:
        return self._node(self._row(node))

    def list(self) -> list[Node]:
        self._answering()
        return [self._node(r) for r in self._nodes.values()]

    # --- writes --------------------------------------------------------------------------------------------
    def enroll(self, request: EnrollRequest) -> Node:
        self._answering()
        with self._lock:
            existing = next((r for r in self._nodes.values() if r["name"] == request.name), None)
            if existing is not None:
                if existing["driver"] != request.driver:
                    raise DriverConflict(
                        f"node {request.name!r} exists with driver {existing['driver']}",
                        code="baremetal_conflict",
                    )
                if request.automated_clean is not None:
                    existing["automated_clean"] = request.automated_clean
                return self._node(existing)
            taken = {m for r in self._nodes.values() for m in r["macs"]}
            if taken & set(request.macs):
                raise DriverConflict(
                    f"MAC {sorted(taken & set(request.macs))[0]} is another node's port",
                    code="baremetal_conflict",
                )
            node_id = str(uuid.uuid4())
            self._nodes[node_id] = {
                "id": node_id,
                "name": request.name,
                "driver": request.driver,
                "resource_class": request.resource_class,
                "properties": dict(request.properties),
                "macs": request.macs,
                "instance_id": "",
                "instance_info": {},
                "config_drive": None,
                "automated_clean": request.automated_clean,
                "history": [],
                "state": NodeState(provision=P.ENROLL, power=PowerState.UNKNOWN),
            }
            return self._node(self._nodes[node_id])

    def delete(self, node: str) -> None:
        with self._lock:
            try:
                row = self._row(node)
            except DriverNotFound:
                return
            st = row["state"]
            if (
                st.provision in {P.ACTIVE, P.DEPLOYING, P.DEPLOY_WAIT, P.CLEANING, P.DEPLOY_FAILED}
                and not st.maintenance
            ):
                raise DriverConflict(
                    f"node {row['name']} is {st.provision}: undeploy it or set maintenance first",
                    code="baremetal_invalid_transition",
                )
            del self._nodes[row["id"]]

    def _transition(self, node: str, verb: str, target: P, wait: bool, **changes: Any) -> Node:
        with self._lock:
            row = self._row(node)
            st: NodeState = row["state"]
            if st.provision in _NO_OP.get(verb, ()):
                return self._node(row)
            if verb == "deploy" and st.provision == P.ACTIVE and row["instance_id"] == changes["instance_id"]:
                return self._node(row)  # a retried deploy step
            if st.provision not in _ALLOWED[verb]:
                raise DriverConflict(
                    f"cannot {verb} node {row['name']} in {st.provision}", code="baremetal_invalid_transition"
                )
            if st.maintenance and verb in {"deploy", "rebuild", "provide", "clean", "inspect"}:
                raise DriverConflict(
                    f"node {row['name']} is in maintenance", code="baremetal_invalid_transition"
                )
            message = self._fail.pop((row["id"], verb), None)
            if message is None and verb == "clean":
                bad = [
                    s for s in changes.pop("steps") if (s.get("interface"), s.get("step")) not in CLEAN_STEPS
                ]
                if bad:
                    message = f"clean step {bad[0].get('step')!r} is not supported"
            changes.pop("steps", None)
            # an undeploy fails in its tear-down, before cleaning; a provide fails in cleaning
            cleans = self._cleans(row) and (verb == "provide" or (verb == "undeploy" and message is None))
            if cleans:
                self._record(row, "automated_cleaning_start", f"Starting automated cleaning with steps=[{_CLEAN_STEP}]")
            if verb in {"deploy", "rebuild"}:
                self._record(row, "deployment_start", f"Starting deployment with steps=[{_DEPLOY_STEP}]")
            if message is not None:
                if cleans and verb == "provide":
                    self._record(row, "automated_cleaning_end", "Automated Cleaning aborted at step "
                                 f"'log_passthrough' with steps=[{_CLEAN_STEP}]", severity="ERROR")
                if verb in {"deploy", "rebuild"}:
                    self._record(row, "deployment_end", "Deployment aborted at step 'deploy' with "
                                 f"steps=[{_DEPLOY_STEP}]", severity="ERROR")
                failed = _FAIL_STATE[verb]
                row["state"] = replace(st, provision=failed, target_provision=None, last_error=message)
                if wait:
                    raise NodeFailed(self._node(row))
                return self._node(row)
            power = st.power
            if verb in {"deploy", "rebuild"}:
                power = PowerState.ON
            if verb == "undeploy":
                power = PowerState.OFF
            row.update(changes)
            if verb in {"deploy", "rebuild"}:
                self._record(row, "deployment_end", f"Deployment completed successfully with steps=[{_DEPLOY_STEP}]")
            if cleans:
                self._record(row, "automated_cleaning_end", "Automated Cleaning completed successfully with steps=[]")
            row["state"] = replace(st, provision=target, target_provision=None, power=power, last_error="")
            return self._node(row)

    def manage(self, node: str, *, wait: bool = True, timeout: float | None = None) -> Node:
        return self._transition(node, "manage", P.MANAGEABLE, wait)

    def inspect(self, node: str, *, timeout: float | None = None) -> InspectionData:
        self._transition(node, "inspect", P.MANAGEABLE, True)
        row = self._row(node)
        props = row["properties"]
        return InspectionData(
            cpus=props.get("cpus"),
            cpu_arch=props.get("cpu_arch", ""),
            memory_mb=props.get("memory_mb"),
            local_gb=props.get("local_gb"),
            macs=row["macs"],
        )

    def provide(self, node: str, *, wait: bool = True, timeout: float | None = None) -> Node:
        return self._transition(node, "provide", P.AVAILABLE, wait)

    def clean(
        self, node: str, steps: list[dict[str, Any]], *, wait: bool = True, timeout: float | None = None
    ) -> Node:
        return self._transition(node, "clean", P.MANAGEABLE, wait, steps=list(steps))

    def deploy(
        self, node: str, request: DeployRequest, *, wait: bool = True, timeout: float | None = None
    ) -> Node:
        return self._transition(
            node,
            "deploy",
            P.ACTIVE,
            wait,
            instance_id=request.instance_id,
            instance_info=request.as_instance_info(),
            config_drive=request.config_drive.as_ironic() if request.config_drive else None,
        )

    def rebuild(
        self, node: str, request: DeployRequest, *, wait: bool = True, timeout: float | None = None
    ) -> Node:
        return self._transition(
            node,
            "rebuild",
            P.ACTIVE,
            wait,
            instance_id=request.instance_id,
            instance_info=request.as_instance_info(),
            config_drive=request.config_drive.as_ironic() if request.config_drive else None,
        )

    def undeploy(self, node: str, *, wait: bool = True, timeout: float | None = None) -> Node:
        return self._transition(
            node, "undeploy", P.AVAILABLE, wait, instance_id="", instance_info={}, config_drive=None
        )

    def set_power(
        self, node: str, action: PowerAction, *, wait: bool = True, timeout: float | None = None
    ) -> Node:
        with self._lock:
            row = self._row(node)
            st = row["state"]
            if st.provision == P.ENROLL:
                raise DriverConflict(
                    f"node {row['name']} is not verified yet (manage it first)",
                    code="baremetal_invalid_transition",
                )
            power = PowerState.OFF if action == PowerAction.OFF else PowerState.ON
            row["state"] = replace(st, power=power, target_power=None)
            return self._node(row)

    def set_maintenance(self, node: str, on: bool, reason: str = "") -> Node:
        with self._lock:
            row = self._row(node)
            row["state"] = replace(row["state"], maintenance=on, maintenance_reason=reason if on else "")
            return self._node(row)

    def recover(self, node: str, *, wait: bool = True, timeout: float | None = None) -> Node:
        st = self.get(node).state
        if not st.failed:
            return self.get(node)
        if st.maintenance:
            self.set_maintenance(node, False)
        if st.provision in {P.CLEAN_FAILED, P.INSPECT_FAILED, P.ADOPT_FAILED}:
            return self.manage(node, wait=wait)
        if st.provision in {P.DEPLOY_FAILED, P.ERROR}:
            return self.undeploy(node, wait=wait)
        raise DriverError(f"no recovery for {st.provision}", code="baremetal_no_recovery")

    # for assertions in tests of the layers above
    def instance_info(self, node: str) -> dict[str, Any]:
        row = self._row(node, check=False)
        return {
            **row["instance_info"],
            **({"configdrive": row["config_drive"]} if row["config_drive"] else {}),
        }
