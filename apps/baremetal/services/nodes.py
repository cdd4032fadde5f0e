"""Bare-metal node writes (staff): enroll a host, mirror what Ironic reports, hold, recover.

`node_enroll` validates, writes the node (credentials encrypted) and starts the `baremetal.node.enroll`
operation: enroll → manage → inspect (compared with the host's catalog hardware) → provide. The host is kept out
of placement (`maintenance`, or `enrolling` as the fleet made it) until its node is `available`; a mismatch holds
the node (Ironic maintenance on, `held_reason` naming every difference) and the host stays out.

Errors: 400 `host_not_baremetal` (the host's provisioning kind is `hypervisor`), 400 `validation_error`
(driver, BMC fields); 409 `node_exists` (the host already has a node); 409 `invalid_state` (a retired host);
503 `baremetal_unavailable` (Ironic does not answer, e.g. still starting; nothing written; `Retry-After`).
"""
from __future__ import annotations

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.db import unique_conflict
from apps.core.errors import Conflict, ValidationFailed
from apps.inventory.models import Host
from apps.inventory.services.hosts import host_maintenance, host_mark_available
from apps.inventory.states import HostState, ProvisioningKind
from apps.operations.runner import operation_start
from apps.operations.selectors import operation_latest_for

from ..drivers.base import EnrollRequest, Node
from ..errors import Code
from ..models import BaremetalNode
from .driver import baremetal_service_require
from .secrets import credentials_decrypt, credentials_encrypt

TARGET = "baremetal.node"
ENROLL, RECOVER = "baremetal.node.enroll", "baremetal.node.recover"
HARDWARE_TYPES = ("redfish", "ipmi", "fake-hardware")


def node_enroll(*, actor, host: Host, driver: str, bmc_address: str = "", bmc_system_id: str = "",
                bmc_username: str = "", bmc_password: str = "", request_id: str = "",
                service_starting: bool = False):
    """Enroll `host` as a bare-metal node; returns (node, operation). See the module docstring for errors.
    `service_starting` (the demo load of `make run`, which starts Ironic after it): not refused while Ironic
    does not answer; the operation's first step is retried with backoff until it does (its hour's deadline)."""
    if host.provisioning_kind != ProvisioningKind.BAREMETAL:
        raise ValidationFailed(f"Host {host.name} is a hypervisor; set its provisioning_kind to baremetal.",
                               code=Code.HOST_NOT_BAREMETAL, errors={"host": ["not a bare-metal host"]})
    if driver not in HARDWARE_TYPES:
        raise ValidationFailed("Unknown hardware type.", errors={"driver": [f"one of {', '.join(HARDWARE_TYPES)}"]})
    if driver != "fake-hardware" and not (bmc_address and bmc_username and bmc_password):
        raise ValidationFailed("A BMC address, username and password are required.",
                               errors={k: ["required"] for k, v in (("bmc_address", bmc_address),
                                       ("bmc_username", bmc_username), ("bmc_password", bmc_password)) if not v})
    if host.state == HostState.RETIRED:
        raise Conflict(f"Host {host.name} is retired.", code="invalid_state")
    if not service_starting:
        baremetal_service_require()
    with transaction.atomic():
        if BaremetalNode.objects.filter(host=host).exists():
            raise Conflict(f"Host {host.name} already has a bare-metal node.", code=Code.NODE_EXISTS)
        with unique_conflict(f"Host {host.name} already has a bare-metal node.", code=Code.NODE_EXISTS):
            node = BaremetalNode.objects.create(
                host=host, driver=driver, bmc_address=bmc_address, bmc_system_id=bmc_system_id,
                bmc_credentials_encrypted=credentials_encrypt({"username": bmc_username, "password": bmc_password})
                if bmc_username or bmc_password else "")
        if host.state == HostState.AVAILABLE:
            host_maintenance(actor=actor, host=host, reason="bare-metal enrollment")
        op = operation_start(kind=ENROLL, target_type=TARGET, target_id=node.pk, actor=actor, request_id=request_id)
        audit_record(actor=actor, action="baremetal.node.enroll", target=node,
                     after={"host": host.name, "driver": driver, "bmc_address": bmc_address,
                            "operation": str(op.pk)})
    return node, op


def enroll_request(node: BaremetalNode) -> EnrollRequest:
    """What the provisioning service is given: the BMC (credentials decrypted here, never stored elsewhere), the
    host's expected scheduling properties and NIC MACs (its ports), resource class ``baremetal.<gpu model>``, and
    the node's `automated_clean` on: Ironic cleans it on provide and after every tenant, whatever its conductor's
    default (a node an operator later switches off in Ironic is reported as not cleaned in the exit receipt)."""
    host = node.host
    creds = credentials_decrypt(node.bmc_credentials_encrypted)
    info: dict = {}
    if node.driver == "redfish":
        info = {"redfish_address": node.bmc_address, "redfish_system_id": node.bmc_system_id or "/redfish/v1/Systems/1",
                "redfish_username": creds.get("username", ""), "redfish_password": creds.get("password", "")}
    elif node.driver == "ipmi":
        info = {"ipmi_address": node.bmc_address, "ipmi_username": creds.get("username", ""),
                "ipmi_password": creds.get("password", "")}
    models = sorted({g.model for g in host.gpus.all()})
    return EnrollRequest(name=host.name, driver=node.driver, driver_info=info,
                         resource_class=f"baremetal.{(models[0] if models else 'cpu').lower()}",
                         properties={"cpus": host.cpu_threads, "memory_mb": host.memory_mib, "cpu_arch": "x86_64"},
                         macs=tuple(host.nics.values_list("mac_address", flat=True)), automated_clean=True)


def node_observe(node: BaremetalNode, seen: Node) -> None:
    """Mirror what the provisioning service reports onto the node row (the only writer of those fields)."""
    values = {"ironic_id": seen.id, "provision_state": str(seen.state.provision), "power_state": str(seen.state.power),
              "maintenance": seen.state.maintenance, "maintenance_reason": seen.state.maintenance_reason[:500],
              "last_error": seen.state.last_error[:1000], "observed_at": now(), "updated_at": now()}
    BaremetalNode.objects.filter(pk=node.pk).update(**values)
    for key, value in values.items():
        setattr(node, key, value)


def inspection_differences(host: Host, found) -> list[str]:
    """How what inspection found (`drivers.base.InspectionData`) differs from the host's catalog record: CPU
    threads, memory (MiB), NIC MACs, and GPUs (NVIDIA PCI devices, vendor 10de display class, where the inventory
    lists PCI devices). Each difference is one line "<what>: expected <x>, found <y>"; [] when they agree."""
    out = []
    if found.cpus is not None and found.cpus != host.cpu_threads:
        out.append(f"cpu threads: expected {host.cpu_threads}, found {found.cpus}")
    if found.memory_mb is not None and found.memory_mb != host.memory_mib:
        out.append(f"memory_mib: expected {host.memory_mib}, found {found.memory_mb}")
    expected_macs = sorted(m.lower() for m in host.nics.values_list("mac_address", flat=True))
    if found.macs and sorted(found.macs) != expected_macs:
        out.append(f"NIC MACs: expected {', '.join(expected_macs) or 'none'}, found {', '.join(sorted(found.macs))}")
    pci = (found.inventory or {}).get("pci_devices")
    if pci is not None:
        gpus = sum(1 for d in pci if str(d.get("vendor_id", "")).lower().removeprefix("0x") == "10de"
                   and str(d.get("class", "")).lower().removeprefix("0x").startswith("03"))
        if gpus != host.gpus.count():
            out.append(f"GPUs: expected {host.gpus.count()}, found {gpus}")
    return out


def node_hold(*, node: BaremetalNode, reason: str) -> None:
    """Hold the node out of service with `reason` (ours; staff clear it with `node_recover`)."""
    BaremetalNode.objects.filter(pk=node.pk).update(held_reason=reason[:1000], updated_at=now())
    node.held_reason = reason[:1000]
    host = Host.objects.get(pk=node.host_id)
    if host.state == HostState.AVAILABLE:
        host_maintenance(actor=None, host=host, reason=f"bare-metal node held: {reason}"[:500])


#: every host condition this app sets starts with it, so it only ever lifts its own (never staff's maintenance)
REASON_PREFIX = "bare-metal"


def node_cleaning(*, node: BaremetalNode, reason: str) -> None:
    """The node is being cleaned: its host leaves placement (`maintenance`) until `node_return_to_service`."""
    host = Host.objects.get(pk=node.host_id)
    if host.state == HostState.AVAILABLE:
        host_maintenance(actor=None, host=host, reason=reason[:500])


def node_return_to_service(*, node: BaremetalNode, reason: str) -> None:
    """The node is `available` and not held: its host may be placed again - when this app took it out
    (`enrolling`, or `maintenance` with one of our reasons); a host staff put in maintenance stays there."""
    host = Host.objects.get(pk=node.host_id)
    ours = host.state == HostState.MAINTENANCE and host.state_reason.startswith(REASON_PREFIX)
    if host.state == HostState.ENROLLING or ours:
        host_mark_available(actor=None, host=host, reason=reason)


def node_recover(*, actor, node: BaremetalNode, request_id: str = ""):
    """Staff: bring a held or failed node back (`baremetal.node.recover`: Ironic's documented way out of its
    failed state, docs/bare-metal.md, then provide, then the host back to available). Idempotent: while one runs,
    it is returned. Returns the operation. 503 `baremetal_unavailable` while Ironic does not answer."""
    baremetal_service_require()
    with transaction.atomic():
        BaremetalNode.objects.select_for_update().get(pk=node.pk)
        running = operation_latest_for(target_type=TARGET, target_id=node.pk, kind=RECOVER)
        if running is not None and not running.finished_at:
            return running
        op = operation_start(kind=RECOVER, target_type=TARGET, target_id=node.pk, actor=actor,
                             request_id=request_id, state={"reason": "staff recovery"})
        audit_record(actor=actor, action="baremetal.node.recover", target=node,
                     before={"provision_state": node.provision_state, "held_reason": node.held_reason},
                     after={"operation": str(op.pk)})
    return op


def node_recover_start(*, node: BaremetalNode, reason: str):
    """The system starts a recovery (a deploy failed mid-way): like `node_recover`, without an actor."""
    running = operation_latest_for(target_type=TARGET, target_id=node.pk, kind=RECOVER)
    if running is not None and not running.finished_at:
        return running
    return operation_start(kind=RECOVER, target_type=TARGET, target_id=node.pk, state={"reason": reason})
