"""OpenStack Ironic through openstacksdk's baremetal proxy (`conn.baremetal`).

`IronicDriver(endpoint="http://ironic:6385")` talks to a standalone Ironic without Keystone (noauth);
`IronicDriver(cloud="name")` takes the endpoint and credentials from clouds.yaml (Keystone). Extra keyword
arguments go to `openstack.connect`. The SDK negotiates the newest API microversion both sides speak.

Waiting polls the node every `poll_interval` seconds (0.5 s by default: the single-process Ironic slows down
when a client polls every 50 ms, and the SDK's own waiter sleeps 2 s between polls). A wait ends when the node
rests (no target state) in the expected state, or raises `NodeFailed` when it rests in a failed one.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import keystoneauth1.exceptions as ks_exc
import openstack
import openstack.exceptions as os_exc

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

DEFAULT_TIMEOUT = 1800.0  # a real deploy writes an image over the network; fake-hardware needs under 2 s
_POWER_TARGET = {PowerAction.ON: "power on", PowerAction.OFF: "power off", PowerAction.REBOOT: "rebooting"}
_NO_OP = {"manage": {P.MANAGEABLE}, "provide": {P.AVAILABLE}, "undeploy": {P.AVAILABLE}}


@contextlib.contextmanager
def _errors(what: str) -> Iterator[None]:
    """Translate SDK and keystoneauth exceptions into the driver exceptions of apps.core.drivers."""
    try:
        yield
    except DriverError:
        raise
    except os_exc.NotFoundException as e:
        raise DriverNotFound(f"{what}: {e.details or e}") from e
    except os_exc.ConflictException as e:
        text = str(e.details or e)
        if "locked" in text.lower():  # NodeLocked: a conductor holds the node for another request
            raise DriverTransientError(f"{what}: {text}", code="baremetal_locked") from e
        raise DriverConflict(f"{what}: {text}", code="baremetal_conflict") from e
    except os_exc.BadRequestException as e:
        text = str(e.details or e)
        if "while it is in state" in text or "can not be performed" in text or "maintenance" in text.lower():
            raise DriverConflict(f"{what}: {text}", code="baremetal_invalid_transition") from e
        raise DriverError(f"{what}: {text}", code="baremetal_bad_request") from e
    except os_exc.HttpException as e:
        if (e.status_code or 500) >= 500:
            raise DriverTransientError(f"{what}: {e.details or e}", code="baremetal_unreachable") from e
        raise DriverError(f"{what}: {e.details or e}", code="baremetal_rejected") from e
    except (
        ks_exc.ConnectionError,
        ks_exc.DiscoveryFailure,
        ks_exc.http.HttpError,
        os_exc.ResourceTimeout,
    ) as e:
        raise DriverTransientError(f"{what}: {e}", code="baremetal_unreachable") from e
    except os_exc.SDKException as e:
        raise DriverError(f"{what}: {e}", code="baremetal_error") from e


#: Seconds `available` waits for Ironic to answer (connect and read).
AVAILABLE_TIMEOUT_S = 3.0


class IronicDriver:
    def __init__(
        self,
        endpoint: str = "",
        cloud: str = "",
        *,
        poll_interval: float = 0.5,
        default_timeout: float = DEFAULT_TIMEOUT,
        **connect: Any,
    ):
        if not endpoint and not cloud:
            raise DriverError(
                "IronicDriver needs an endpoint or a clouds.yaml cloud", code="baremetal_config"
            )
        self._connect = dict(connect)
        if cloud:
            self._connect["cloud"] = cloud
        else:
            self._connect.setdefault("auth_type", "none")
        # the SDK retries a 409 (NodeLocked) five times with backoff (16 s); the caller retries a transient error
        self._connect.setdefault("baremetal_status_code_retries", 0)
        if endpoint:
            self._connect["baremetal_endpoint_override"] = endpoint.rstrip("/")
        self._conn: openstack.connection.Connection | None = None
        self.poll_interval = poll_interval
        self.default_timeout = default_timeout

    @property
    def api(self):
        """The SDK's baremetal proxy (connects on first use)."""
        if self._conn is None:
            with _errors("connect to Ironic"):
                self._conn = openstack.connect(
                    load_yaml_config="cloud" in self._connect, load_envvars=False, **self._connect
                )
        return self._conn.baremetal

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # --- reads ---------------------------------------------------------------------------------------------
    @staticmethod
    def _state(raw) -> NodeState:
        return NodeState(
            provision=P.parse(raw.provision_state),
            target_provision=P.parse(raw.target_provision_state) if raw.target_provision_state else None,
            power=PowerState.parse(raw.power_state),
            target_power=PowerState.parse(raw.target_power_state) if raw.target_power_state else None,
            maintenance=bool(raw.is_maintenance),
            maintenance_reason=raw.maintenance_reason or "",
            last_error=raw.last_error or "",
        )

    def _node(self, raw, macs: tuple[str, ...] | None = None) -> Node:
        if macs is None:
            with _errors(f"list ports of node {raw.id}"):
                macs = tuple(sorted(p.address for p in self.api.ports(node_id=raw.id)))
        return Node(
            id=raw.id,
            name=raw.name or "",
            driver=raw.driver,
            state=self._state(raw),
            resource_class=raw.resource_class or "",
            properties=dict(raw.properties or {}),
            macs=macs,
            instance_id=raw.instance_id or "",
            automated_clean=raw.is_automated_clean_enabled,
        )

    def _raw(self, node: str):
        with _errors(f"get node {node}"):
            return self.api.get_node(node)

    def _find(self, node: str):
        try:
            return self.api.get_node(node)
        except os_exc.NotFoundException:
            return None

    def available(self) -> bool:
        """One read of Ironic's root with `AVAILABLE_TIMEOUT_S`: a service that accepts the connection but does
        not answer (hung, overloaded) is not available, and the request that asked is not held for long."""
        try:
            # a connection of its own: the SDK's version discovery (on first use) honours only the session's
            # timeout, and the driver's own connection must not time out a long deploy's reads
            conn = openstack.connect(load_yaml_config="cloud" in self._connect, load_envvars=False,
                                     api_timeout=AVAILABLE_TIMEOUT_S, **self._connect)
            try:
                return conn.baremetal.get("/", connect_retries=0, raise_exc=False).status_code < 500
            finally:
                conn.close()
        except Exception:  # noqa: BLE001 - refused, not yet listening, discovery failed: not available
            return False

    def get(self, node: str) -> Node:
        return self._node(self._raw(node))

    def list(self) -> list[Node]:
        with _errors("list nodes"):
            ports: dict[str, list[str]] = {}
            for port in self.api.ports(details=True):
                ports.setdefault(port.node_id, []).append(port.address)
            return [
                self._node(raw, tuple(sorted(ports.get(raw.id, ())))) for raw in self.api.nodes(details=True)
            ]

    def history(self, node: str) -> list[NodeEvent]:
        raw = self._raw(node)
        with _errors(f"history of node {node}"):  # no SDK call for it (openstacksdk 4.x)
            resp = self.api.get(f"/nodes/{raw.id}/history", params={"detail": "true"}, microversion="1.78")
            os_exc.raise_from_response(resp)  # a 4xx/5xx answer raises here
            entries = resp.json().get("history") or []
        events = [
            NodeEvent(id=e.get("uuid", ""), created_at=e.get("created_at") or "", event_type=e.get("event_type") or "",
                      severity=e.get("severity") or "", event=e.get("event") or "")
            for e in entries
        ]
        return sorted(events, key=lambda e: e.created_at)

    # --- waiting -------------------------------------------------------------------------------------------
    def wait_for(self, node: str, expected: P, *, timeout: float | None = None) -> Node:
        """Poll until the node rests in `expected`; `NodeFailed` when it rests in a failed state instead."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.default_timeout)
        while True:
            raw = self._raw(node)
            state = self._state(raw)
            if state.failed:  # Ironic keeps the target state on a failed node (clean failed -> manageable)
                raise NodeFailed(self._node(raw))
            if state.target_provision is None and state.provision == expected:
                return self._node(raw)
            if time.monotonic() >= deadline:
                raise DriverTransientError(
                    f"node {node} is {state.provision} (target {state.target_provision}),"
                    f" not {expected}, after {timeout} s",
                    code="baremetal_timeout",
                )
            time.sleep(self.poll_interval)

    def _wait_power(self, node: str, expected: PowerState, timeout: float | None, error_before: str) -> Node:
        deadline = time.monotonic() + (timeout if timeout is not None else self.default_timeout)
        while True:
            raw = self._raw(node)
            state = self._state(raw)
            if state.target_power is None:
                if state.power == expected:
                    return self._node(raw)
                if state.last_error and state.last_error != error_before:  # the conductor gave up
                    raise DriverError(
                        f"power {expected} node {node}: {state.last_error}", code="baremetal_power_failed"
                    )
            if time.monotonic() >= deadline:
                raise DriverTransientError(
                    f"node {node} is {state.power}, not {expected}, after {timeout} s",
                    code="baremetal_timeout",
                )
            time.sleep(self.poll_interval)

    def _provision(
        self, node: str, verb: str, action: str, expected: P, wait: bool, timeout: float | None, **kwargs: Any
    ) -> Node:
        raw = self._raw(node)
        if P.parse(raw.provision_state) in _NO_OP.get(verb, ()) and not raw.target_provision_state:
            return self._node(raw)
        with _errors(f"{verb} node {node}"):
            self.api.set_node_provision_state(raw, action, **kwargs)
        return self.wait_for(raw.id, expected, timeout=timeout) if wait else self.get(raw.id)

    # --- writes --------------------------------------------------------------------------------------------
    def enroll(self, request: EnrollRequest) -> Node:
        with _errors(f"enroll node {request.name}"):
            raw = self._find(request.name)
            if raw is None:
                attrs: dict[str, Any] = {
                    "name": request.name,
                    "driver": request.driver,
                    "driver_info": dict(request.driver_info),
                    "properties": dict(request.properties),
                }
                if request.resource_class:
                    attrs["resource_class"] = request.resource_class
                if request.automated_clean is not None:
                    attrs["automated_clean"] = request.automated_clean
                attrs.update({f"{iface}_interface": impl for iface, impl in request.interfaces.items()})
                raw = self.api.create_node(**attrs)
            elif raw.driver != request.driver:
                raise DriverConflict(
                    f"node {request.name!r} exists with driver {raw.driver}", code="baremetal_conflict"
                )
            elif request.automated_clean is not None and raw.is_automated_clean_enabled != request.automated_clean:
                raw = self.api.patch_node(
                    raw, [{"op": "add", "path": "/automated_clean", "value": request.automated_clean}]
                )
            have = {p.address for p in self.api.ports(node_id=raw.id)}
            for mac in request.macs:  # a retried enroll creates only the ports the last try did not
                if mac not in have:
                    self.api.create_port(node_uuid=raw.id, address=mac)
        return self.get(raw.id)

    def delete(self, node: str) -> None:
        with _errors(f"delete node {node}"):
            raw = self._find(node)
            if raw is None:
                return
            try:
                self.api.delete_node(raw, ignore_missing=True)
            except (os_exc.BadRequestException, os_exc.ConflictException) as e:
                text = str(e.details or e)
                if "locked" in text.lower():
                    raise
                raise DriverConflict(
                    f"delete node {node}: {text}", code="baremetal_invalid_transition"
                ) from e

    def manage(self, node: str, *, wait: bool = True, timeout: float | None = None) -> Node:
        return self._provision(node, "manage", "manage", P.MANAGEABLE, wait, timeout)

    def inspect(self, node: str, *, timeout: float | None = None) -> InspectionData:
        found = self._provision(node, "inspect", "inspect", P.MANAGEABLE, True, timeout)
        inventory: dict[str, Any] = {}
        with contextlib.suppress(DriverError), _errors(f"inventory of node {node}"):
            inventory = dict(self.api.get_node_inventory(found.id).get("inventory") or {})
        props = found.properties
        return InspectionData(
            cpus=props.get("cpus"),
            cpu_arch=props.get("cpu_arch", ""),
            memory_mb=props.get("memory_mb"),
            local_gb=props.get("local_gb"),
            macs=found.macs,
            inventory=inventory,
        )

    def provide(self, node: str, *, wait: bool = True, timeout: float | None = None) -> Node:
        return self._provision(node, "provide", "provide", P.AVAILABLE, wait, timeout)

    def clean(
        self, node: str, steps: list[dict[str, Any]], *, wait: bool = True, timeout: float | None = None
    ) -> Node:
        return self._provision(node, "clean", "clean", P.MANAGEABLE, wait, timeout, clean_steps=list(steps))

    def _set_instance(self, node: str, request: DeployRequest) -> None:
        raw = self._raw(node)
        patch: list[dict[str, Any]] = []
        if raw.instance_id != request.instance_id:
            patch.append({"op": "add", "path": "/instance_uuid", "value": request.instance_id})
        info = request.as_instance_info()
        if dict(raw.instance_info or {}) != info:
            patch.append({"op": "add", "path": "/instance_info", "value": info})
        if patch:
            with _errors(f"set the instance of node {node}"):
                self.api.patch_node(raw, patch)

    def deploy(
        self, node: str, request: DeployRequest, *, wait: bool = True, timeout: float | None = None
    ) -> Node:
        raw = self._raw(node)
        if raw.instance_id == request.instance_id and P.parse(raw.provision_state) in {
            P.ACTIVE,
            P.DEPLOYING,
            P.DEPLOY_WAIT,
        }:
            return self.wait_for(raw.id, P.ACTIVE, timeout=timeout) if wait else self._node(raw)  # a retry
        if P.parse(raw.provision_state) != P.AVAILABLE or raw.target_provision_state:
            raise DriverConflict(
                f"cannot deploy node {node} in {raw.provision_state}", code="baremetal_invalid_transition"
            )
        self._set_instance(raw.id, request)
        config_drive = request.config_drive.as_ironic() if request.config_drive else None
        return self._provision(raw.id, "deploy", "active", P.ACTIVE, wait, timeout, config_drive=config_drive)

    def rebuild(
        self, node: str, request: DeployRequest, *, wait: bool = True, timeout: float | None = None
    ) -> Node:
        self._set_instance(node, request)
        config_drive = request.config_drive.as_ironic() if request.config_drive else None
        return self._provision(node, "rebuild", "rebuild", P.ACTIVE, wait, timeout, config_drive=config_drive)

    def undeploy(self, node: str, *, wait: bool = True, timeout: float | None = None) -> Node:
        found = self._provision(node, "undeploy", "deleted", P.AVAILABLE, wait, timeout)
        if wait and found.instance_id:  # Ironic keeps instance_uuid after teardown; the node is free now
            with _errors(f"clear the instance of node {node}"):
                self.api.patch_node(found.id, [{"op": "remove", "path": "/instance_uuid"}])
            found = self.get(found.id)
        return found

    def set_power(
        self, node: str, action: PowerAction, *, wait: bool = True, timeout: float | None = None
    ) -> Node:
        raw = self._raw(node)
        with _errors(f"power {action} node {node}"):
            self.api.set_node_power_state(raw, _POWER_TARGET[action])
        if not wait:
            return self.get(raw.id)
        expected = PowerState.OFF if action == PowerAction.OFF else PowerState.ON
        return self._wait_power(raw.id, expected, timeout, raw.last_error or "")

    def set_maintenance(self, node: str, on: bool, reason: str = "") -> Node:
        with _errors(f"maintenance {'on' if on else 'off'} for node {node}"):
            if on:
                self.api.set_node_maintenance(node, reason or None)
            else:
                self.api.unset_node_maintenance(node)
        return self.get(node)

    def recover(self, node: str, *, wait: bool = True, timeout: float | None = None) -> Node:
        found = self.get(node)
        st = found.state
        if not st.failed:
            return found
        if st.maintenance:
            self.set_maintenance(found.id, False)
        if st.provision in {P.CLEAN_FAILED, P.INSPECT_FAILED, P.ADOPT_FAILED}:
            return self._provision(found.id, "recover", "manage", P.MANAGEABLE, wait, timeout)
        if st.provision in {P.DEPLOY_FAILED, P.ERROR}:
            return self.undeploy(found.id, wait=wait, timeout=timeout)
        raise DriverError(f"no recovery for node {node} in {st.provision}", code="baremetal_no_recovery")
