"""GPU scrub: a GPU that held a tenant is `dirty` until the node agent has cleaned it (docs/compute.md, "Scrub";
ADR 0501).

`gpus_scrub` is the one way to start a scrub; every release path of the apps that hand GPUs to tenants calls it
(compute: delete, failed create, vanished domain, local delete, re-create off a host; reservations: lease end)
before or in the same transaction as the ledger release. It marks the GPUs `dirty` and queues, in this order (the
agent runs a host's commands oldest first):

1. `reset_vf` for each SR-IOV VF the tenant's vGPU used (the agent clears the VF's vGPU type and resets the
   function, then health-checks its GPU; ADR 0502), first because a GPU instance with a vGPU on it is in use;
2. `destroy_gpu_instance` for each of the tenant's MIG GPU instances that still exists;
3. `deactivate_partition` for each of its NVSwitch partitions that is still active;
4. `reset_gpu` (reset + health check) for each GPU not in MIG or vGPU mode (a MIG or vGPU GPU's other GPU
   instances or VFs may belong to other tenants, so its scrub is the destroy / reset of the tenant's own device).

The agent's reports (`agent_command_report`) move the GPU with `gpu_scrub_progress`: all commands succeeded and
every reset's health check said `ok` -> `clean`; a command failed or a health check did not pass ->
`scrub_failed`. Placement (apps.scheduling) places only `clean` GPUs and `host_mark_available` refuses a host
with GPUs that are not clean (409 `gpu_scrub_pending`). An agent that is offline leaves the GPUs `dirty`: the
commands wait in the queue. Staff re-queue a failed scrub with `gpu_scrub_retry` once the cause is fixed; there
is deliberately no way to mark a GPU clean without the agent.
"""
from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.db.models import Q

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.errors import Conflict

from ..errors import Code
from ..models import AgentCommand, Gpu, GpuInstance, Host, VirtualFunction
from ..states import CommandKind, CommandStatus, GpuHealth, GpuMode, GpuScrub

LIVE = (CommandStatus.QUEUED, CommandStatus.DISPATCHED)
RESETS = (CommandKind.RESET_GPU, CommandKind.RESET_VF)  # each reports the GPU's health check after the reset
_FIELDS = ["scrub_commands", "scrub_reason", "scrub_state", "scrub_changed_at", "updated_at"]


def _save(gpu: Gpu) -> None:
    gpu.updated_at = now()
    gpu.save(update_fields=_FIELDS)


def _pending(host: Host, kind: str, match: dict, scrubbing: Iterable[str]) -> AgentCommand | None:
    """A command of `kind` whose payload has `match` that is reused instead of queueing twice: one still queued
    (the agent runs it after the tenant's VM is gone), or one already dispatched that is a step of the scrub the
    GPU is in (`scrubbing`: the GPU has not been placed since it was queued). Any other dispatched command (a
    staff reset the agent took before the tenant's VM ran) may have run already and cleans nothing of it."""
    return (AgentCommand.objects.filter(host=host, kind=kind, **{f"payload__{k}": v for k, v in match.items()})
            .filter(Q(status=CommandStatus.QUEUED) | Q(status=CommandStatus.DISPATCHED, pk__in=list(scrubbing)))
            .order_by("created_at").first())


def _queue(host: Host, kind: str, payload: dict, match: dict, scrubbing: Iterable[str] = ()) -> AgentCommand:
    from .agent import agent_command_enqueue

    return _pending(host, kind, match, scrubbing) or agent_command_enqueue(  # the released tenant's own devices
        actor=None, host=host, kind=kind, payload=payload, ledger_guard=False)


def gpus_scrub(*, actor, host: Host, gpu_indexes: Iterable[int], gpu_instances: Iterable[tuple[int, int]] = (),
               partitions: Iterable[int] = (), vfs: Iterable[tuple[int, str]] = (), reason: str) -> dict[str, str]:
    """Mark the host's GPUs `gpu_indexes` dirty and queue their scrub (see the module docstring).

    `gpu_instances`: (gpu index, start slice) of the tenant's MIG GPU instances; `partitions`: its NVSwitch
    partition ids (their deactivation is a step of the scrub of every GPU in `gpu_indexes`); `vfs`: (gpu index,
    VF PCI address) of its vGPUs' SR-IOV VFs. Idempotent: a command already queued for the same device is reused.
    Returns {name: command id}, names `vf_reset_<address>`, `gpu_instance_destroy_<index>_<start>`,
    `partition_deactivate_<id>`, `reset_<index>`. A GPU with nothing to do (a GPU instance already gone, a VF
    not in inventory) stays as it was.
    """
    gpu_instances, partitions, vfs = sorted(set(gpu_instances)), sorted(set(partitions)), sorted(set(vfs))
    indexes = sorted(set(gpu_indexes) | {i for i, _ in gpu_instances} | {i for i, _ in vfs})
    with transaction.atomic():
        host = Host.objects.select_for_update().get(pk=host.pk)
        gpus = {g.index: g for g in Gpu.objects.select_for_update().filter(host=host, index__in=indexes)
                .order_by("index")}
        per_gpu: dict[int, list[str]] = {i: [] for i in gpus}
        scrubbing = {c for g in gpus.values() if g.scrub_state != GpuScrub.CLEAN for c in g.scrub_commands}
        names: dict[str, str] = {}
        for index, address in vfs:
            gpu = gpus.get(index)
            if gpu is not None and VirtualFunction.objects.filter(gpu=gpu, pci_address=address).exists():
                cmd = _queue(host, CommandKind.RESET_VF, {"gpu_index": index, "vf_address": address},
                             {"vf_address": address}, scrubbing)
                names[f"vf_reset_{address}"] = str(cmd.pk)
                per_gpu[index].append(str(cmd.pk))
        for index, start in gpu_instances:
            gpu = gpus.get(index)
            if gpu is not None and GpuInstance.objects.filter(gpu=gpu, start=start).exists():
                cmd = _queue(host, CommandKind.DESTROY_GPU_INSTANCE, {"gpu_index": index, "start": start},
                             {"gpu_index": index, "start": start}, scrubbing)
                names[f"gpu_instance_destroy_{index}_{start}"] = str(cmd.pk)
                per_gpu[index].append(str(cmd.pk))
        for part in partitions:
            if part in host.active_partitions:
                cmd = _queue(host, CommandKind.DEACTIVATE_PARTITION, {"partition_id": part}, {"partition_id": part},
                             scrubbing)
                names[f"partition_deactivate_{part}"] = str(cmd.pk)
                for ids in per_gpu.values():
                    ids.append(str(cmd.pk))
        for index, gpu in gpus.items():
            if gpu.mode not in (GpuMode.MIG, GpuMode.VGPU):
                cmd = _queue(host, CommandKind.RESET_GPU, {"gpu_index": index}, {"gpu_index": index}, scrubbing)
                names[f"reset_{index}"] = str(cmd.pk)
                per_gpu[index].append(str(cmd.pk))
        for index, gpu in gpus.items():
            if per_gpu[index]:
                _mark_dirty(actor, gpu, per_gpu[index], reason)
            elif gpu.scrub_state == GpuScrub.DIRTY:
                _evaluate(gpu)  # a hold (`gpus_hold_dirty`) with nothing to do on this GPU ends here
    return names


def gpus_hold_dirty(*, actor, host: Host, gpu_indexes: Iterable[int] = (), pci_addresses: Iterable[str] = (),
                    reason: str) -> int:
    """Mark GPUs `dirty` without queuing a command: their capacity was released while the tenant's VM still runs
    (a lease ended and the instance's delete or stop was just asked); the `gpus_scrub` of that workflow queues
    the commands. Returns the GPUs marked."""
    with transaction.atomic():
        gpus = list(Gpu.objects.select_for_update().filter(host=host).filter(
            Q(index__in=list(gpu_indexes)) | Q(pci_address__in=list(pci_addresses))).order_by("index"))
        for gpu in gpus:
            if gpu.scrub_state == GpuScrub.CLEAN:
                gpu.scrub_state, gpu.scrub_reason, gpu.scrub_changed_at = GpuScrub.DIRTY, reason[:500], now()
                _save(gpu)
                audit_record(actor=actor, action="inventory.gpu.scrub_hold", target=gpu,
                             before={"scrub_state": GpuScrub.CLEAN},
                             after={"scrub_state": gpu.scrub_state, "reason": gpu.scrub_reason})
    return len(gpus)


def _mark_dirty(actor, gpu: Gpu, ids: list[str], reason: str) -> None:
    if gpu.scrub_state == GpuScrub.DIRTY and set(ids) <= set(gpu.scrub_commands):
        return  # the same scrub asked again: nothing new
    before = gpu.scrub_state
    gpu.scrub_commands = list(dict.fromkeys([*gpu.scrub_commands, *ids]))
    gpu.scrub_reason = reason[:500]
    gpu.scrub_state, gpu.scrub_changed_at = GpuScrub.DIRTY, now()
    _save(gpu)
    audit_record(actor=actor, action="inventory.gpu.scrub_queued", target=gpu, before={"scrub_state": before},
                 after={"scrub_state": gpu.scrub_state, "reason": gpu.scrub_reason, "commands": ids})
    _evaluate(gpu)


def _evaluate(gpu: Gpu) -> None:
    """Move a locked GPU from its scrub commands' outcomes: any failed (or a reset whose health check did not say
    ok) -> `scrub_failed`; any still queued/dispatched -> `dirty`; else `clean` (the command list is emptied)."""
    cmds = list(AgentCommand.objects.filter(pk__in=gpu.scrub_commands).order_by("created_at"))
    failed = [c for c in cmds if c.status == CommandStatus.FAILED]
    unhealthy = [c for c in cmds if c.status == CommandStatus.SUCCEEDED and c.kind in RESETS
                 and c.result.get("health", GpuHealth.UNKNOWN) != GpuHealth.OK]
    if failed:
        state, reason = GpuScrub.FAILED, f"{failed[0].kind} failed: {failed[0].error}"
    elif unhealthy:
        state, reason = GpuScrub.FAILED, f"health check after reset: {unhealthy[0].result.get('health', 'unknown')}"
    elif any(c.status in LIVE for c in cmds):
        return
    else:
        state, reason = GpuScrub.CLEAN, ""
    if state == gpu.scrub_state and reason == gpu.scrub_reason:
        return
    before = gpu.scrub_state
    gpu.scrub_state, gpu.scrub_reason, gpu.scrub_changed_at = state, reason[:500], now()
    if state == GpuScrub.CLEAN:
        gpu.scrub_commands = []
    _save(gpu)
    audit_record(actor=None, action=f"inventory.gpu.{'scrub_clean' if state == GpuScrub.CLEAN else 'scrub_failed'}",
                 target=gpu, before={"scrub_state": before}, after={"scrub_state": state, "reason": reason})


def gpu_scrub_progress(cmd: AgentCommand) -> None:
    """Called with a command whose outcome was just recorded (in the report's transaction): re-evaluate every GPU
    whose scrub waits for it."""
    for gpu in Gpu.objects.select_for_update().filter(host_id=cmd.host_id, scrub_commands__contains=[str(cmd.pk)]):
        _evaluate(gpu)


def gpu_scrub_retry(*, actor, gpu: Gpu, reason: str) -> Gpu:
    """Queue a failed scrub again (staff, after fixing the cause): every failed command, and every reset whose
    health check did not pass, is queued anew; the GPU is `dirty` until the agent reports them.

    Raises Conflict 409 `gpu_scrub_not_failed` unless the GPU is `scrub_failed` (a clean GPU may hold a tenant
    right now; a dirty one is already waiting for the agent)."""
    from .hosts import _reason

    reason = _reason(reason)
    with transaction.atomic():
        gpu = Gpu.objects.select_for_update().select_related("host").get(pk=gpu.pk)
        if gpu.scrub_state != GpuScrub.FAILED:
            raise Conflict(f"GPU {gpu} is {gpu.scrub_state}; only a failed scrub is queued again.",
                           code=Code.GPU_SCRUB_NOT_FAILED, scrub_state=gpu.scrub_state)
        keep, again = [], []
        for c in AgentCommand.objects.filter(pk__in=gpu.scrub_commands).order_by("created_at"):
            bad = c.status == CommandStatus.FAILED or (
                c.kind in RESETS and c.result.get("health", GpuHealth.UNKNOWN) != GpuHealth.OK)
            (again if bad else keep).append(c)
        ids = [str(c.pk) for c in keep]
        for c in again:
            if c.kind == CommandKind.DESTROY_GPU_INSTANCE and not GpuInstance.objects.filter(
                    gpu=gpu, start=c.payload["start"]).exists():
                continue  # gone meanwhile (the agent's inventory report): nothing left to destroy
            if c.kind == CommandKind.DEACTIVATE_PARTITION and c.payload["partition_id"] not in \
                    gpu.host.active_partitions:
                continue
            keys = ("gpu_index", "start", "partition_id", "vf_address")
            match = {k: c.payload[k] for k in keys if k in c.payload}
            ids.append(str(_queue(gpu.host, c.kind, {k: v for k, v in c.payload.items() if k in keys}, match,
                                  gpu.scrub_commands).pk))
        audit_record(actor=actor, action="inventory.gpu.scrub_retry", target=gpu,
                     before={"scrub_state": gpu.scrub_state}, after={"reason": reason, "commands": ids})
        gpu.scrub_commands, gpu.scrub_state, gpu.scrub_changed_at = ids, GpuScrub.DIRTY, now()
        gpu.scrub_reason = f"retry: {reason}"[:500]
        _save(gpu)
        _evaluate(gpu)
    return gpu


def host_dirty_gpus(host: Host) -> list[dict]:
    """[{index, scrub_state, scrub_reason}] of the host's GPUs that are not clean, by index."""
    return [{"index": i, "scrub_state": s, "scrub_reason": r} for i, s, r in
            Gpu.objects.filter(host=host).exclude(scrub_state=GpuScrub.CLEAN).order_by("index")
            .values_list("index", "scrub_state", "scrub_reason")]
