"""VMs of a host that rebooted (docs/compute.md "After a host reboots", ADR 0509).

Inventory records a reboot when the agent reports a new boot id (`Host.observed["reboot"]`: {boot_id,
previous_boot_id, booted_at, seen_at}, and once the agent's restore finished {restored_at, restore_command,
missing: [{pci_address, step, code, error}]}). For each such host the reconciler (`hosts_rebooted_reconcile`, the
first step of `instances_reconcile`) then:

1. queues one `restore_devices` for the boot (payload `boot_id`): the SR-IOV VFs the inventory records for each
   GPU and HCA port (their count, `sriov_numvfs` at boot is 0) and the functions its VMs get by passthrough
   (`devices.pci`, `devices.hca`) and every whole (exclusive-mode) GPU, a VM's or free, to bind to vfio-pci (a
   free GPU that did not come back is reported missing and leaves placement through inventory's hook). MIG GPU instances come back through inventory's restore
   of the recorded layout (`apply_mig_layout`, queued from the same report), vGPU types on VFs through the start;
2. once the restore reported (and no MIG restore of an instance's GPU is still queued), each VM made before the
   reboot (`active` or `stopped`, no unfinished operation) is settled once per boot (`devices.reboot`):
   - a device did not come back (its PCI address, its VFs' parent, or its GPU's MIG restore failed): `error`
     with `device_missing` and a reason that names the device; its allocations are kept (the tenant deletes it,
     or health's remediation re-creates it elsewhere);
   - else a VM that was running when the host went down is started again (`instance.start`, which sets its VF's
     vGPU type and waits for its MIG GPU instance): `active` with its domain shut off, or `stopped` by the
     reconciler (domain seen shut off) at or after the boot began;
   - a VM the tenant had stopped stays stopped.
"""
from __future__ import annotations

import datetime as dt
import logging

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.transitions import transition
from apps.inventory.models import AgentCommand, Gpu, Host, VirtualFunction
from apps.inventory.services.agent import agent_command_enqueue, host_reboot_settled
from apps.inventory.states import CommandKind, CommandStatus, GpuMode
from apps.operations.selectors import targets_with_unfinished_operations

from ..drivers.base import PowerState
from ..errors import Code
from ..models import Instance
from ..states import INSTANCE_TRANSITIONS, InstanceStatus
from .instances import TARGET, instance_start

log = logging.getLogger("gpucloud.compute.reboot")
_WAITING = (CommandStatus.QUEUED, CommandStatus.DISPATCHED)


def _when(text: str | None) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def _restore_payload(host: Host, instances: list[Instance], boot_id: str) -> dict:
    counts: dict[str, int] = {}
    for gpu_pci in VirtualFunction.objects.filter(gpu__host=host).values_list("gpu__pci_address", flat=True):
        counts[gpu_pci] = counts.get(gpu_pci, 0) + 1
    for port_pci in VirtualFunction.objects.filter(hca_port__host=host).exclude(
            hca_port__pci_address="").values_list("hca_port__pci_address", flat=True):
        counts[port_pci] = counts.get(port_pci, 0) + 1
    # every whole (exclusive-mode) GPU is a passthrough device, with a VM or free: a free one that did not come
    # back is reported missing too and leaves placement (inventory's device-missing hook), not only a VM's
    whole = Gpu.objects.filter(host=host, mode=GpuMode.EXCLUSIVE).exclude(pci_address="").values_list(
        "pci_address", flat=True)
    vfio = sorted({*whole, *(a for i in instances
                             for a in [*(i.devices or {}).get("pci", []), *(i.devices or {}).get("hca", [])] if a)})
    return {"boot_id": boot_id, "sriov": [{"pci_address": a, "num_vfs": n} for a, n in sorted(counts.items()) if a],
            "vfio": [{"pci_address": a} for a in vfio]}


def _restore_command(host: Host, instances: list[Instance], boot_id: str) -> AgentCommand | None:
    """The boot's `restore_devices` command, queued now when there is none yet; None when nothing needs one."""
    cmd = (AgentCommand.objects.filter(host=host, kind=CommandKind.RESTORE_DEVICES, payload__boot_id=boot_id)
           .order_by("created_at").first())
    if cmd is not None:
        return cmd
    payload = _restore_payload(host, instances, boot_id)
    if not payload["sriov"] and not payload["vfio"]:
        return None
    return agent_command_enqueue(actor=None, host=host, kind=CommandKind.RESTORE_DEVICES, payload=payload,
                                 ledger_guard=False)


def _missing(inst: Instance, reboot: dict, gpus: dict[int, Gpu]) -> str:
    """'' when the instance's devices came back; else which did not, in words."""
    d = inst.devices or {}
    lost = {m.get("pci_address"): m for m in reboot.get("missing") or []}
    gpu_pci = {g.index: g.pci_address for g in gpus.values()}
    mine = [(a, "GPU") for a in d.get("pci", [])] + [(a, "HCA") for a in d.get("hca", [])]
    for vf in d.get("vfs", []):
        mine += [(vf.get("address"), "vGPU VF"), (gpu_pci.get(vf.get("gpu_index")), "GPU (parent of its vGPU VF)")]
    for address, what in mine:
        if address in lost:
            return f"{what} {address} did not come back after the host rebooted ({lost[address].get('error', '')})"
    gi = d.get("gpu_instance")
    gpu = gpus.get(gi["gpu_index"]) if gi else None
    if gpu is not None and (gpu.observed or {}).get("mig_restore_pending"):
        return (f"MIG GPU instance {gi.get('profile', '')} at slice {gi['start']} of GPU {gpu.index} "
                f"({gpu.pci_address}) did not come back after the host rebooted (the restore of its layout failed)")
    return ""


def _settle(inst: Instance, reboot: dict, gpus: dict[int, Gpu], booted_at: dt.datetime | None) -> str:
    """Error, restart or leave one instance; returns what was done (`error` | `started` | `stopped`)."""
    reason = _missing(inst, reboot, gpus)
    with transaction.atomic():
        inst = Instance.objects.select_for_update().get(pk=inst.pk)
        mark = {**(inst.devices or {}), "reboot": {"boot_id": reboot["boot_id"]}}
        if reason:
            transition(inst, "fail", INSTANCE_TRANSITIONS, extra={"error_code": Code.DEVICE_MISSING,
                                                                  "error_reason": reason[:1000]})
            outcome = "error"
        elif inst.status == InstanceStatus.ACTIVE or (
                inst.observed_state == PowerState.SHUTOFF and booted_at is not None
                and inst.observed_at is not None and inst.observed_at >= booted_at):
            if inst.status == InstanceStatus.ACTIVE:
                transition(inst, "sync_stopped", INSTANCE_TRANSITIONS)
            outcome = "started"
        else:
            outcome = "stopped"
        mark["reboot"]["outcome"] = outcome
        Instance.objects.filter(pk=inst.pk).update(devices=mark)
        inst.devices = mark
        op = instance_start(actor=None, instance=inst) if outcome == "started" else None
        audit_record(actor=None, action="compute.instance.host_rebooted", target=inst,
                     after={"boot_id": reboot["boot_id"], "outcome": outcome, "reason": reason,
                            "operation": str(op.pk) if op else None})
    return outcome


def hosts_rebooted_reconcile() -> dict[str, int]:
    """Settle the VMs of every host whose latest reboot they have not been settled for. -> counts per outcome.
    A host whose reboot is fully settled (restore reported, no VM left to settle) is marked (`settled_at`) and
    skipped by later passes, so the 30 s reconcile reads only hosts with a reboot in progress."""
    counts = {"started": 0, "stopped": 0, "error": 0, "waiting": 0}
    for host in Host.objects.filter(observed__has_key="reboot").exclude(observed__reboot__has_key="settled_at"):
        reboot = host.observed["reboot"]
        seen = _when(reboot.get("seen_at"))
        pending = [i for i in Instance.objects.filter(host=host, status__in=[InstanceStatus.ACTIVE,
                                                                             InstanceStatus.STOPPED])
                   if ((i.devices or {}).get("reboot") or {}).get("boot_id") != reboot["boot_id"]
                   and (seen is None or i.created_at < seen)]
        if not pending and "restored_at" in reboot:
            host_reboot_settled(host_id=host.pk, boot_id=reboot["boot_id"])  # not read again until its next reboot
            continue
        cmd = _restore_command(host, pending, reboot["boot_id"])  # a host without VMs gets its VFs back too
        busy = targets_with_unfinished_operations(target_type=TARGET, target_ids=[i.pk for i in pending])
        pending = [i for i in pending if i.pk not in busy]
        if not pending:
            continue
        if cmd is not None and (cmd.status in _WAITING or "restored_at" not in reboot):
            counts["waiting"] += len(pending)
            continue
        gpus = {g.index: g for g in Gpu.objects.filter(host=host)}
        mig_waiting = set(AgentCommand.objects.filter(host=host, kind=CommandKind.APPLY_MIG_LAYOUT,
                                                      status__in=_WAITING).values_list("gpu__index", flat=True))
        booted_at = _when(reboot.get("booted_at"))
        for inst in pending:
            gi = (inst.devices or {}).get("gpu_instance")
            if gi and gi["gpu_index"] in mig_waiting:
                counts["waiting"] += 1
                continue
            counts[_settle(inst, reboot, gpus, booted_at)] += 1
    return counts
