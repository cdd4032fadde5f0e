"""Repair of a failed GPU or host and the return-to-service check; host acceptance; RMA (docs/health.md, "Repair";
ADR 0213).

A repair is opened at ingest (`repairs_open_for_event`, in the event's transaction) when the classification row
names `reset_gpu` or `reboot_host` (a row naming `rma` opens the RMA record at once). `repairs_advance` (beat,
idempotent, each row locked with SKIP LOCKED in its own transaction) then moves each open repair:

1. `waiting`: until the device holds no tenant (no live allocation on the GPU, or on the host for a reboot: the
   remediations move the VMs off first); then the reset (`reset_gpu`, the scrub's own agent command: reset +
   health check) or the reboot (`reboot_host`) is queued for the agent -> `repairing`;
2. `repairing`: once the agent reported it, the return-to-service check is queued (`run_diagnostics`: DCGM
   diagnostics where installed, the configured validation command otherwise) -> `checking`; a failed reset or
   reboot (or a reset whose health check is not ok) fails the attempt;
3. `checking`: once reported, the answer is stored in `result` (tool, tool version, driver version, result,
   errors). It **passes only when the result is `pass` and no error was logged** (a PASS with errors fails).
   Passed: the GPU is marked healthy (its incident closes: the SLA downtime ends) and a host the event took out is
   marked available (after the scrub of its GPUs, ADR 0501: `host_mark_available` refuses while one is dirty, and
   the repair waits) -> `passed`. Failed -> `failed`, and the next attempt opens at once, unless the device failed
   `HEALTH_RMA_AFTER_FAILED_REPAIRS` attempts within `HEALTH_RMA_WINDOW_SECONDS`: then an RMA record (part,
   serial, model, dates) is opened and the device stays out of service.

Acceptance: a host enrolled while `HOST_ACCEPTANCE_CHECK` is on stays `enrolling` (out of placement); the beat
opens an `acceptance` row for it (no action, the same check) and the pass completes its enrollment
(`enrolling -> available`). The agent offline: commands wait in its queue and the repair with them.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.db import transaction

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.errors import DomainError, InvalidState
from apps.inventory.models import AgentCommand, Gpu, Host
from apps.inventory.services import hosts as host_services
from apps.inventory.services.agent import agent_command_enqueue
from apps.inventory.states import CommandKind, CommandStatus, GpuHealth, HostState
from apps.scheduling.selectors import allocation_list_at

from ..models import HealthEvent, Repair, Rma
from ..states import OPEN_REPAIR, RepairAction, RepairKind, RepairStatus, RmaPart

log = logging.getLogger("gpucloud.health")
R = RepairStatus
DONE = (CommandStatus.SUCCEEDED, CommandStatus.FAILED)
#: ingest actions that took the host out of placement (the repair's pass returns it)
HOST_TAKEN_OUT = ("host_mark_faulty", "host_drain", "host_cordon")


def _rma_after() -> int:
    return getattr(settings, "HEALTH_RMA_AFTER_FAILED_REPAIRS", 3)


def _rma_window() -> dt.timedelta:
    return dt.timedelta(seconds=getattr(settings, "HEALTH_RMA_WINDOW_SECONDS", 7 * 86400))


def _audit(action: str, row, before=None, after=None) -> None:
    audit_record(actor=None, action=action, target=row, before=before, after=after)


def _open_for(host_id, gpu_id) -> bool:
    """An open repair of this device (or a reboot of its host) or an open RMA of it already stands."""
    repairs = Repair.objects.filter(host_id=host_id, status__in=OPEN_REPAIR)
    if repairs.filter(gpu_id=gpu_id).exists() or repairs.filter(action=RepairAction.REBOOT_HOST).exists():
        return True
    return Rma.objects.filter(host_id=host_id, gpu_id=gpu_id, closed_at__isnull=True).exists()


def repair_open(*, host: Host, gpu: Gpu | None, action: str, event: HealthEvent | None = None,
                kind: str = RepairKind.REPAIR, attempt: int = 1, reason: str = "") -> Repair | None:
    """Open a repair (or an acceptance) in `waiting`; None when one is open for the device already. Audited."""
    if _open_for(host.pk, gpu.pk if gpu else None):
        return None
    row = Repair.objects.create(host=host, gpu=gpu, event=event, kind=kind, action=action, status=R.WAITING,
                                attempt=attempt, reason=reason[:500])
    _audit("health.repair.open", row, after={"host": host.name, "gpu": gpu.index if gpu else None,
                                              "kind": kind, "action": action, "attempt": attempt})
    return row


def rma_open(*, host: Host, gpu: Gpu | None, reason: str, event: HealthEvent | None = None,
             failed_repairs: int = 0) -> Rma:
    """Record an RMA of the GPU (or the host); the open one when it exists. Audited (`health.rma.open`)."""
    existing = Rma.objects.filter(host=host, gpu=gpu, closed_at__isnull=True).first()
    if existing is not None:
        return existing
    row = Rma.objects.create(
        host=host, gpu=gpu, part=RmaPart.GPU if gpu else RmaPart.HOST, serial=(gpu.serial if gpu else host.serial),
        model=(gpu.model if gpu else ""), event=event, reason=reason[:500], failed_repairs=failed_repairs,
        opened_at=now())
    _audit("health.rma.open", row, after={"host": host.name, "part": row.part, "serial": row.serial,
                                           "model": row.model, "failed_repairs": failed_repairs,
                                           "reason": row.reason})
    return row


def repairs_open_for_event(*, event: HealthEvent, pending: list[str]) -> dict:
    """At ingest (its transaction): the repair the row asks for (`reboot_host` over `reset_gpu`), or the RMA
    (`rma`). Returns what it opened for `applied`: ``{"repair": id}`` / ``{"rma": id}`` / {}."""
    host, gpu = event.host, event.gpu
    if "rma" in pending:
        return {"rma": str(rma_open(host=host, gpu=gpu, event=event,
                                    reason=f"health: {event.classification} (event {event.pk})").pk)}
    if "reboot_host" in pending:
        action = RepairAction.REBOOT_HOST
    elif "reset_gpu" in pending and gpu is not None:
        action = RepairAction.RESET_GPU
    else:
        return {}
    row = repair_open(host=host, gpu=gpu, action=action, event=event, reason=f"health: {event.classification}")
    return {"repair": str(row.pk)} if row else {}


def _busy(row: Repair) -> bool:
    """The device still holds a tenant (a live allocation on the GPU, or on the host for a reboot)."""
    gpu_id = row.gpu_id if row.action == RepairAction.RESET_GPU else None
    return allocation_list_at(host_id=row.host_id, gpu_id=gpu_id, at=now()).exists()


def _queue_check(row: Repair) -> None:
    cmd = agent_command_enqueue(actor=None, host=row.host, kind=CommandKind.RUN_DIAGNOSTICS, payload={
        "gpu_indexes": [row.gpu.index] if row.gpu else [], "level": getattr(settings, "HEALTH_CHECK_LEVEL", 2)})
    row.check_command, row.status = cmd, R.CHECKING
    row.save(update_fields=["check_command", "status", "updated_at"])


WAITING = "waiting for the {device} to hold no tenant: "


def _waiting_reason(row: Repair) -> str:
    """Why a busy repair waits, for staff: the tenants still on the device (kind and id, the first three), e.g.
    a VM on another GPU of a host to reboot, which the event did not move."""
    gpu_id = row.gpu_id if row.action == RepairAction.RESET_GPU else None
    held = sorted(set(allocation_list_at(host_id=row.host_id, gpu_id=gpu_id, at=now())
                      .values_list("consumer_type", "consumer_id")))
    names = ", ".join(f"{kind} {pk}" for kind, pk in held[:3]) + (", ..." if len(held) > 3 else "")
    device = "GPU" if gpu_id else "host"
    return (WAITING.format(device=device) + f"{len(held)} still on it ({names})")[:500]


def _step_waiting(row: Repair) -> None:
    if row.action != RepairAction.NONE and _busy(row):
        wait = _waiting_reason(row)
        if row.reason != wait:
            Repair.objects.filter(pk=row.pk).update(reason=wait, updated_at=now())
        return
    row.started_at = now()
    if row.reason.startswith(("waiting for the GPU", "waiting for the host")):
        row.reason = ""
        row.save(update_fields=["reason", "updated_at"])
    if row.action == RepairAction.NONE:
        row.save(update_fields=["started_at", "updated_at"])
        _queue_check(row)
    else:
        payload = {"gpu_index": row.gpu.index} if row.action == RepairAction.RESET_GPU else {}
        kind = CommandKind.RESET_GPU if row.action == RepairAction.RESET_GPU else CommandKind.REBOOT_HOST
        row.repair_command = agent_command_enqueue(actor=None, host=row.host, kind=kind, payload=payload)
        row.status = R.REPAIRING
        row.save(update_fields=["started_at", "repair_command", "status", "updated_at"])
    _audit("health.repair.start", row, after={"status": row.status, "action": row.action})


def _step_repairing(row: Repair) -> None:
    cmd = row.repair_command
    if cmd is None or cmd.status not in DONE:
        return
    if cmd.status == CommandStatus.FAILED:
        return _fail(row, f"{cmd.kind} failed: {cmd.error}")
    if cmd.kind == CommandKind.RESET_GPU and cmd.result.get("health", GpuHealth.UNKNOWN) != GpuHealth.OK:
        return _fail(row, f"health check after the reset: {cmd.result.get('health', 'unknown')}")
    _queue_check(row)
    return None


def check_passed(cmd: AgentCommand) -> bool:
    """The return-to-service rule: the command succeeded, the tool said `pass` and logged no error."""
    return (cmd.status == CommandStatus.SUCCEEDED and cmd.result.get("result") == "pass"
            and not cmd.result.get("errors"))


def _step_checking(row: Repair) -> None:
    cmd = row.check_command
    if cmd is None or cmd.status not in DONE:
        return None
    if not row.result:
        keys = ("tool", "tool_version", "driver_version", "result", "errors", "warnings", "exit_code", "output_tail")
        row.result = {**{k: cmd.result.get(k) for k in keys}, "passed": check_passed(cmd),
                     "command_error": cmd.error, "completed_at": cmd.completed_at.isoformat()}
        row.save(update_fields=["result", "updated_at"])
    if not row.result["passed"]:
        errors = row.result.get("errors") or []
        what = f"{row.result.get('result') or cmd.error or 'no answer'}" + (
            f" with {len(errors)} error(s) logged: {errors[0]}" if errors else "")
        return _fail(row, f"return-to-service check: {what}")
    return _return_to_service(row)


def _return_to_service(row: Repair) -> None:
    from apps.inventory.models import Incident

    host = Host.objects.get(pk=row.host_id)
    reason = f"health: return-to-service check passed ({row.kind} {row.pk})"
    open_before = set(Incident.objects.filter(host=host, end__isnull=True).values_list("pk", flat=True))
    try:
        with transaction.atomic():
            if row.kind == RepairKind.ACCEPTANCE:
                if host.state == HostState.ENROLLING:
                    host_services.host_condition_set(actor=None, host=host, action="enroll_complete", reason=reason)
            else:
                if row.gpu_id and Gpu.objects.filter(pk=row.gpu_id, health=GpuHealth.FAULTY).exists():
                    host_services.gpu_mark_healthy(actor=None, gpu=row.gpu, reason=reason)
                took_out = any(a in HOST_TAKEN_OUT for a in ((row.event.applied or {}).get("actions", [])
                                                             if row.event else []))
                if took_out and host.state in (HostState.CORDONED, HostState.DRAINING, HostState.FAULTY):
                    host_services.host_mark_available(actor=None, host=host, reason=reason)
    except DomainError as exc:  # e.g. 409 gpu_scrub_pending: the scrub has not finished; the next beat retries
        wait = f"passed; waiting to return to service: {exc.detail}"[:500]
        if row.reason != wait:
            Repair.objects.filter(pk=row.pk).update(reason=wait)
        return
    row.status, row.finished_at, row.reason = R.PASSED, now(), ""
    row.save(update_fields=["status", "finished_at", "reason", "updated_at"])
    if row.action == RepairAction.REBOOT_HOST:
        _repairs_open_covered(row)
    if row.event is not None:
        from .notify import incident_notify

        for incident in Incident.objects.filter(pk__in=open_before, end__isnull=False):
            incident_notify(row.event, incident, closed=True)
    _audit("health.repair.pass", row, after={"check": {k: row.result.get(k) for k in ("tool", "tool_version",
                                                                                     "result")}})


def _repairs_open_covered(reboot: Repair) -> None:
    """A GPU event that came while this reboot was open opened no repair (the reboot covers the host), but the
    reboot's check looked only at its own GPU: each GPU such an event left faulty gets, once the reboot passed, a
    reset of that GPU (the host was just rebooted, so a row asking for a reboot gets the GPU's reset too: the host,
    back in service, is not taken out again), whose own check returns it. Events the breaker held or that opened
    an RMA are left as they are."""
    events = (HealthEvent.objects.filter(host_id=reboot.host_id, gpu__isnull=False, gpu__health=GpuHealth.FAULTY,
                                         created_at__gte=reboot.created_at)
              .exclude(gpu_id=reboot.gpu_id).select_related("host", "gpu").order_by("created_at"))
    for event in events:
        applied = event.applied or {}
        if applied.get("pending") and not {"repair", "rma", "breaker"} & set(applied) \
                and "rma" not in applied["pending"]:
            repair_open(host=event.host, gpu=event.gpu, action=RepairAction.RESET_GPU, event=event,
                        reason=f"health: {event.classification} (after the host's reboot {reboot.pk})")


def _fail(row: Repair, reason: str) -> None:
    row.status, row.finished_at, row.reason = R.FAILED, now(), reason[:500]
    row.save(update_fields=["status", "finished_at", "reason", "updated_at"])
    _audit("health.repair.fail", row, after={"reason": row.reason, "attempt": row.attempt})
    failed = Repair.objects.filter(host_id=row.host_id, gpu_id=row.gpu_id, kind=row.kind, status=R.FAILED,
                                   finished_at__gte=now() - _rma_window()).count()
    if failed >= _rma_after():
        rma_open(host=row.host, gpu=row.gpu, event=row.event, failed_repairs=failed,
                 reason=f"{failed} failed {row.kind}s within {_rma_window()}; last: {reason}")
        return
    repair_open(host=row.host, gpu=row.gpu, action=row.action, event=row.event, kind=row.kind,
                attempt=row.attempt + 1, reason=f"attempt {row.attempt + 1} after: {reason}")


def acceptances_open() -> int:
    """Open an acceptance for every host that waits for it: `enrolling` with a live agent credential (its agent
    enrolled), no open repair and no open RMA. Returns how many were opened."""
    if not getattr(settings, "HOST_ACCEPTANCE_CHECK", True):
        return 0
    opened = 0
    hosts = Host.objects.filter(state=HostState.ENROLLING, agent_credentials__revoked_at__isnull=True).distinct()
    for host in hosts:
        with transaction.atomic():
            if Host.objects.select_for_update(skip_locked=True).filter(pk=host.pk).first() is None:
                continue
            opened += repair_open(host=host, gpu=None, action=RepairAction.NONE, kind=RepairKind.ACCEPTANCE,
                                  reason="acceptance of a newly enrolled host") is not None
    return opened


def repairs_advance(*, limit: int = 200) -> dict:
    """Beat: open acceptances, then move every open repair one step (see the module docstring). Returns counts
    {opened, advanced} (a row counts when its status changed)."""
    opened = acceptances_open()
    advanced = 0
    ids = list(Repair.objects.filter(status__in=OPEN_REPAIR).order_by("created_at").values_list("pk", flat=True)
               [:limit])
    for pk in ids:
        try:
            advanced += _advance_one(pk)
        except DomainError as exc:  # e.g. 409 gpu_allocated: a tenant took the device meanwhile; the next beat retries
            log.warning("repair %s not advanced: %s", pk, exc.detail)
            Repair.objects.filter(pk=pk).update(reason=f"not advanced: {exc.detail}"[:500])
    return {"opened": opened, "advanced": advanced}


def _advance_one(pk) -> int:
    """Move one open repair a step in its own transaction (row locked, SKIP LOCKED); 1 when its status changed."""
    with transaction.atomic():
        row = (Repair.objects.select_for_update(skip_locked=True, of=("self",))
               .select_related("host", "gpu", "event", "repair_command", "check_command").filter(pk=pk).first())
        if row is None or row.status not in OPEN_REPAIR:
            return 0
        before = row.status
        if row.host.state == HostState.RETIRED:
            row.status, row.finished_at, row.reason = R.CANCELLED, now(), "the host was retired"
            row.save(update_fields=["status", "finished_at", "reason", "updated_at"])
        elif row.status == R.WAITING:
            _step_waiting(row)
        elif row.status == R.REPAIRING:
            _step_repairing(row)
        else:
            _step_checking(row)
        return int(row.status != before)


def rma_ship(*, actor, rma: Rma) -> Rma:
    """Staff record the part shipped to its vendor (`shipped_at` = now). 409 `invalid_state` when shipped or
    closed already. Audited."""
    with transaction.atomic():
        row = Rma.objects.select_for_update().get(pk=rma.pk)
        if row.shipped_at is not None or row.closed_at is not None:
            state = "closed" if row.closed_at else "shipped"
            raise InvalidState(f"The RMA is {state} already.", current_state=state, allowed_states=["open"])
        row.shipped_at = now()
        row.save(update_fields=["shipped_at", "updated_at"])
        audit_record(actor=actor, action="health.rma.ship", target=row, after={"shipped_at": row.shipped_at})
    return row


def rma_close(*, actor, rma: Rma, outcome: str) -> Rma:
    """Staff close the RMA with the vendor's `outcome` (replaced / repaired / rejected; `closed_at` = now). The
    device does not return to service by this: a replaced or repaired part is checked like any (staff mark it
    healthy, or a new host enrolls through acceptance). 409 `invalid_state` when closed already. Audited."""
    with transaction.atomic():
        row = Rma.objects.select_for_update().get(pk=rma.pk)
        if row.closed_at is not None:
            raise InvalidState("The RMA is closed already.", current_state="closed",
                               allowed_states=["open", "shipped"])
        row.closed_at, row.outcome = now(), outcome
        row.save(update_fields=["closed_at", "outcome", "updated_at"])
        audit_record(actor=actor, action="health.rma.close", target=row,
                     after={"closed_at": row.closed_at, "outcome": outcome})
    return row


__all__ = ["check_passed", "repair_open", "repairs_advance", "repairs_open_for_event", "rma_close", "rma_open",
           "rma_ship"]
