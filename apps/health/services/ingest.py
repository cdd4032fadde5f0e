"""Health event ingest: validate, de-duplicate, classify (classification.yaml), record who it touched, and apply
the effects through inventory's host/GPU condition services, all in one transaction (docs/health.md).

One entry point for every source: the agent API (`POST /agent/health-events`), `manage.py health_inject` and the
staff preview (`health_event_preview`, the same plan with no writes). Effects:

- `cordon_gpu` / `provider_at_fault` with a GPU: `gpu_mark_faulty` (GPU not placeable; opens the GPU's inventory
  Incident, `provider_at_fault` from the row, or turns an open one into the provider's): billing reads it as SLA
  downtime of whatever sat on that GPU.
- `provider_at_fault` without a GPU: `host_mark_faulty` (host incident).
- `drain_host` / `cordon_host`: `host_drain` / `host_cordon` when the host is in a state that allows it (a host
  already cordoned, draining, in maintenance or faulty takes no new placements and is left as it is).
- The breaker (`services.breaker`): before a host is taken out (drain, cordon, mark faulty) or its VMs moved,
  the event's leaf switch is asked; when it is open (or this host opens it) only the GPU's containment applies
  and `applied.breaker` names the component incident.
- `fence_host` (a silent host, ADR 0218): a fence (`services.fencing`) instead of moving anything now; the
  BMC's confirmed power-off (or staff's) then moves the VMs as `recreate_vm` does. `applied.fence` says where
  it stands.
- `recreate_vm`: a lease the event touched moves to a free spare host first (`services.lease_spares`;
  `applied.lease_spares` says where, or why it stays held), then a remediation per VM the event touched (`services.remediation`, under the project's consent
  mode); `applied.remediations` lists them.
- `reset_gpu`, `reboot_host`: a repair of the GPU / host (`services.repair`: once the device holds no tenant,
  the reset or reboot through the agent, then the return-to-service check); `rma`: an RMA record at once.
  `applied.repair` / `applied.rma` name them (`applied.pending` lists the row's hooks).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Sum

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.errors import ValidationFailed
from apps.inventory.models import Gpu, HcaPort, Host
from apps.inventory.services import hosts as host_services
from apps.inventory.states import HOST_TRANSITIONS, HostState
from apps.scheduling.selectors import allocation_list_at

from ..classification import Rule, classification_load, classify, host_level, threshold_rules
from ..errors import Code
from ..models import HealthEvent, HealthEventImpact
from ..states import EFFECTS_HOOKS, NVSWITCH_KINDS, XID_KINDS, EventKind, EventSource
from .breaker import breaker_check

CLOCK_SKEW = dt.timedelta(minutes=5)
#: a PCI address as the kernel spells it (domain:bus:device.function), the NVSwitch's identity
PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
#: plan actions that take a host out of service (counted and held by the breaker, `services.breaker`)
HOST_TAKE_OUT = ("host_mark_faulty", "host_drain", "host_cordon")


@dataclass
class Plan:
    rule: Rule
    version: int
    window_counts: dict
    actions: list = field(default_factory=list)  # [(action, detail)] applied in order
    pending: list = field(default_factory=list)  # remediation hooks

    def as_dict(self) -> dict:
        return {
            "classification_version": self.version,
            "rule": self.rule.as_dict(),
            "window_counts": self.window_counts,
            "actions": [a for a, _ in self.actions],
            "pending": self.pending,
        }


@dataclass(frozen=True)
class _Event:
    host: Host
    gpu: Gpu | None
    hca_port: HcaPort | None
    nvswitch: str
    nvswitch_port: int | None
    kind: str
    xid: int | None
    count: int
    observed_at: dt.datetime


def _invalid(msg: str, code: str, fld: str):
    raise ValidationFailed(msg, code=code, errors={fld: [msg]})


def _resolve(
    *,
    host: Host,
    kind: str,
    xid,
    gpu_index,
    gpu_uuid,
    hca_device,
    hca_port_number,
    count,
    observed_at,
    nvswitch="",
    nvswitch_port=None,
) -> _Event:
    if kind not in EventKind.values:
        _invalid(f"Unknown kind {kind!r}.", Code.INVALID_EVENT, "kind")
    if kind in XID_KINDS and xid is None:
        _invalid(f"kind {kind} needs an xid number.", Code.INVALID_EVENT, "xid")
    if kind not in XID_KINDS and xid is not None:
        _invalid(f"xid is only for kinds {', '.join(XID_KINDS)}.", Code.INVALID_EVENT, "xid")
    nvswitch = (nvswitch or "").strip().lower()
    if kind in NVSWITCH_KINDS and not PCI_ADDRESS.match(nvswitch):
        _invalid(f"kind {kind} needs the NVSwitch's PCI address (0000:05:00.0).", Code.INVALID_EVENT, "nvswitch")
    if kind not in NVSWITCH_KINDS and (nvswitch or nvswitch_port is not None):
        _invalid(f"nvswitch is only for kinds {', '.join(NVSWITCH_KINDS)}.", Code.INVALID_EVENT, "nvswitch")
    if (gpu_index is not None or gpu_uuid) and host_level(kind):
        _invalid(f"kind {kind} is about the whole host, not one GPU: send it without gpu_index or gpu_uuid.",
                 Code.INVALID_EVENT, "gpu_uuid" if gpu_uuid and gpu_index is None else "gpu_index")
    if count is None or count < 1:
        _invalid("count must be at least 1.", Code.INVALID_EVENT, "count")
    at = observed_at or now()
    if at.tzinfo is None:
        _invalid("observed_at must carry a time zone.", Code.INVALID_EVENT, "observed_at")
    if at > now() + CLOCK_SKEW:
        _invalid("observed_at is in the future.", Code.INVALID_EVENT, "observed_at")
    try:  # the threshold windows end at observed_at: their start must be a time too (not before year 1)
        at - dt.timedelta(seconds=max((r.threshold_window_s or 0) for r in classification_load().rules))
    except OverflowError:
        _invalid("observed_at is too far in the past.", Code.INVALID_EVENT, "observed_at")
    gpu = None
    if gpu_index is not None or gpu_uuid:
        qs = Gpu.objects.filter(host=host)
        qs = qs.filter(index=gpu_index) if gpu_index is not None else qs
        qs = qs.filter(uuid=gpu_uuid) if gpu_uuid else qs
        gpu = qs.first()
        if gpu is None:
            _invalid(
                f"Host {host.name} has no GPU {gpu_uuid or gpu_index}.",
                Code.GPU_UNKNOWN,
                "gpu_uuid" if gpu_uuid else "gpu_index",
            )
    port = None
    if hca_device:
        port = HcaPort.objects.filter(host=host, device=hca_device, port_number=hca_port_number or 1).first()
        if port is None:
            _invalid(
                f"Host {host.name} has no HCA port {hca_device}/{hca_port_number or 1}.",
                Code.HCA_PORT_UNKNOWN,
                "hca_device",
            )
    return _Event(host, gpu, port, nvswitch, nvswitch_port, kind, xid, count, at)


def _dedup_key(ev: _Event, given: str) -> str:
    key = (given or "").strip() or ":".join(
        str(p)
        for p in (
            ev.kind,
            ev.xid,
            ev.gpu.index if ev.gpu else "",
            ev.hca_port.pk if ev.hca_port else "",
            ev.nvswitch,
            "" if ev.nvswitch_port is None else ev.nvswitch_port,
            ev.observed_at.isoformat(),
        )
    )
    return key if len(key) <= 128 else "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def _window_counts(ev: _Event) -> dict:
    counts = {}
    for rule in threshold_rules(ev.kind, ev.xid):
        since = ev.observed_at - dt.timedelta(seconds=rule.threshold_window_s)
        prior = HealthEvent.objects.filter(
            host=ev.host,
            gpu=ev.gpu,
            hca_port=ev.hca_port,
            nvswitch=ev.nvswitch,
            kind=ev.kind,
            xid=ev.xid,
            observed_at__gt=since,
            observed_at__lte=ev.observed_at,
        )
        counts[rule.id] = (prior.aggregate(n=Sum("count"))["n"] or 0) + ev.count
    return counts


def _plan(ev: _Event) -> Plan:
    counts = _window_counts(ev)
    rule = classify(ev.kind, ev.xid, counts)
    plan = Plan(rule, classification_load().version, counts)
    effects = set(rule.effects)
    host_state = Host.objects.filter(pk=ev.host.pk).values_list("state", flat=True).get()
    if ev.gpu is not None and effects & {"cordon_gpu", "provider_at_fault"}:
        plan.actions.append(("gpu_mark_faulty", {"provider_at_fault": rule.provider_at_fault}))
    elif ev.gpu is None and rule.provider_at_fault and host_state in HOST_TRANSITIONS["mark_faulty"][0]:
        plan.actions.append(("host_mark_faulty", {"provider_at_fault": True}))
        host_state = HostState.FAULTY
    if "drain_host" in effects and host_state in HOST_TRANSITIONS["drain"][0]:
        plan.actions.append(("host_drain", {}))
    elif "cordon_host" in effects and host_state in HOST_TRANSITIONS["cordon"][0]:
        plan.actions.append(("host_cordon", {}))
    plan.pending = [e for e in rule.effects if e in EFFECTS_HOOKS]
    return plan


def _reason(ev: _Event, rule: Rule) -> str:
    what = ev.kind if ev.xid is None else f"{'SXid' if ev.kind in NVSWITCH_KINDS else 'XID'} {ev.xid}"
    if ev.gpu:
        where = f" on gpu{ev.gpu.index}"
    elif ev.hca_port:
        where = f" on {ev.hca_port.device}/{ev.hca_port.port_number}"
    elif ev.nvswitch:
        port = "" if ev.nvswitch_port is None else f" port {ev.nvswitch_port}"
        where = f" on NVSwitch {ev.nvswitch}{port}"
    else:
        where = ""
    return f"health: {what}{where} ({rule.klass}, rule {rule.id})"


def _apply(*, actor, ev: _Event, plan: Plan) -> dict:
    reason = _reason(ev, plan.rule)
    for action, detail in plan.actions:
        if action == "gpu_mark_faulty":
            host_services.gpu_mark_faulty(actor=actor, gpu=ev.gpu, reason=reason, **detail)
        elif action == "host_mark_faulty":
            host_services.host_mark_faulty(actor=actor, host=ev.host, reason=reason, **detail)
        elif action == "host_drain":
            host_services.host_drain(actor=actor, host=ev.host, reason=reason)
        elif action == "host_cordon":
            host_services.host_cordon(actor=actor, host=ev.host, reason=reason)
    incident = None
    if ev.gpu is not None and plan.actions and plan.actions[0][0] == "gpu_mark_faulty":
        incident = ev.gpu.incidents.filter(end__isnull=True).values_list("pk", flat=True).first()
    elif any(a == "host_mark_faulty" for a, _ in plan.actions):
        incident = (
            ev.host.incidents.filter(gpu__isnull=True, end__isnull=True).values_list("pk", flat=True).first()
        )
    return {
        "actions": [a for a, _ in plan.actions],
        "pending": plan.pending,
        "incident": str(incident) if incident else None,
        "window_counts": plan.window_counts,
    }


def _impacts(event: HealthEvent) -> None:
    rows = {}
    for alloc in allocation_list_at(host_id=event.host_id, gpu_id=event.gpu_id, at=event.observed_at):
        rows.setdefault(
            alloc.consumer_id,
            HealthEventImpact(
                event=event,
                project_id=alloc.project_id,
                resource_type=alloc.consumer_type,
                resource_id=alloc.consumer_id,
            ),
        )
    HealthEventImpact.objects.bulk_create(rows.values())


def health_event_preview(
    *,
    host: Host,
    kind: str,
    xid: int | None = None,
    gpu_index: int | None = None,
    gpu_uuid: str = "",
    hca_device: str = "",
    hca_port_number: int | None = None,
    nvswitch: str = "",
    nvswitch_port: int | None = None,
    count: int = 1,
    observed_at: dt.datetime | None = None,
) -> dict:
    """What ingesting this event would do now (classification row, actions, pending hooks); writes nothing."""
    ev = _resolve(
        host=host,
        kind=kind,
        xid=xid,
        gpu_index=gpu_index,
        gpu_uuid=gpu_uuid,
        hca_device=hca_device,
        hca_port_number=hca_port_number,
        nvswitch=nvswitch,
        nvswitch_port=nvswitch_port,
        count=count,
        observed_at=observed_at,
    )
    return _plan(ev).as_dict()


def health_event_ingest(
    *,
    actor,
    host: Host,
    kind: str,
    xid: int | None = None,
    gpu_index: int | None = None,
    gpu_uuid: str = "",
    hca_device: str = "",
    hca_port_number: int | None = None,
    nvswitch: str = "",
    nvswitch_port: int | None = None,
    count: int = 1,
    observed_at: dt.datetime | None = None,
    dedup_key: str = "",
    message: str = "",
    source: str = EventSource.AGENT,
) -> tuple[HealthEvent, bool]:
    """Record one health event and apply its effects; returns (event, created).

    A second report with the same `dedup_key` (per host) returns the stored event with created False and changes
    nothing. Raises ValidationFailed (400): `health_gpu_unknown` / `health_hca_port_unknown` for a device the host
    does not have, `health_invalid_event` for a bad kind/xid/count/time (in the future beyond the clock skew, or
    so near year 1 that a threshold window would start before it), an NVSwitch kind without the switch's
    PCI address (`nvswitch`; `xid` is the SXid number there), or a GPU (`gpu_index`, `gpu_uuid`) on a host-level
    kind such as `heartbeat_lost` (`classification.host_level`).
    """
    ev = _resolve(
        host=host,
        kind=kind,
        xid=xid,
        gpu_index=gpu_index,
        gpu_uuid=gpu_uuid,
        hca_device=hca_device,
        hca_port_number=hca_port_number,
        nvswitch=nvswitch,
        nvswitch_port=nvswitch_port,
        count=count,
        observed_at=observed_at,
    )
    key = _dedup_key(ev, dedup_key)
    with transaction.atomic():
        # one at a time per host; NO KEY UPDATE: a transaction holding one of the host's GPUs that inserts a row
        # naming the host (its foreign key's KEY SHARE at commit) is not blocked by it, so it cannot deadlock with
        # this ingest waiting for that GPU (FOR UPDATE did)
        Host.objects.select_for_update(no_key=True).filter(pk=host.pk).values_list("pk", flat=True).get()
        existing = HealthEvent.objects.filter(host=host, dedup_key=key).first()
        if existing is not None:
            return existing, False
        plan = _plan(ev)
        event = HealthEvent.objects.create(
            host=host,
            gpu=ev.gpu,
            hca_port=ev.hca_port,
            nvswitch=ev.nvswitch,
            nvswitch_port=ev.nvswitch_port,
            kind=kind,
            xid=xid,
            count=count,
            observed_at=ev.observed_at,
            dedup_key=key,
            source=source,
            message=(message or "")[:500],
            classification=plan.rule.klass,
            classification_version=plan.version,
            effects=list(plan.rule.effects),
            needs_return_to_service=plan.rule.needs_return_to_service,
        )
        _impacts(event)
        # the breaker is asked before a host is taken out or VMs move; it counts only the events that took a host
        # out (`takes_host_out`): a GPU fault that moves the VMs off that GPU leaves its host in service
        takes_host = any(a in HOST_TAKE_OUT for a, _ in plan.actions)
        takes_out = "recreate_vm" in plan.rule.effects or takes_host
        breaker = breaker_check(host=host, hca_port=ev.hca_port) if takes_out else None
        held = []
        if breaker is not None:  # keep the GPU's own containment; take no host out, move no VM
            held = [a for a, _ in plan.actions if a in HOST_TAKE_OUT]
            plan.actions = [(a, d) for a, d in plan.actions if a not in HOST_TAKE_OUT]
        open_before = set(ev.host.incidents.filter(end__isnull=True).values_list("pk", flat=True))
        event.applied = _apply(actor=actor, ev=ev, plan=plan)
        if breaker is not None:
            event.applied.update(breaker=str(breaker.pk), held_actions=held, takes_host_out=False)
        elif takes_host:
            event.applied["takes_host_out"] = True
        if "fence_host" in plan.rule.effects and breaker is None:
            from .fencing import fence_open

            fence = fence_open(event=event)  # the VMs move only once the host is confirmed off (ADR 0218)
            event.applied["fence"] = {"id": str(fence.pk), "status": fence.status, "reason": fence.reason}
        elif "recreate_vm" in plan.rule.effects and breaker is None:
            from .remediation import vms_move_off

            event.applied.update(vms_move_off(event=event))
        if plan.pending and breaker is None:
            from .repair import repairs_open_for_event

            event.applied.update(repairs_open_for_event(event=event, pending=plan.pending))
        event.save(update_fields=["applied"])
        from .notify import health_event_notify, incident_notify

        health_event_notify(event)  # webhooks + e-mail of the organizations it touched
        for incident in ev.host.incidents.filter(end__isnull=True).exclude(pk__in=open_before):
            incident_notify(event, incident, closed=False)
        audit_record(
            actor=actor,
            action="health.event.ingest",
            target=event,
            after={
                "host": host.name,
                "kind": kind,
                "xid": xid,
                "gpu_index": ev.gpu.index if ev.gpu else None,
                "nvswitch": ev.nvswitch or None,
                "class": plan.rule.klass,
                "rule": plan.rule.id,
                **event.applied,
            },
        )
    return event, True


__all__ = ["device_missing_after_reboot", "health_event_ingest", "health_event_preview"]


def device_missing_after_reboot(*, host: Host, gpu_index: int, boot_id: str, message: str) -> None:
    """Inventory's hook (`register_device_missing_hook`): a GPU that did not come back after its host rebooted
    is recorded as a failed device operation (`device_op_failed`, source control_plane, once per GPU and boot);
    its classification row applies the effects (the GPU is cordoned)."""
    health_event_ingest(actor=None, host=host, kind=EventKind.DEVICE_OP_FAILED, gpu_index=gpu_index,
                        dedup_key=f"reboot:{boot_id}:gpu{gpu_index}"[:128], message=message,
                        source=EventSource.CONTROL_PLANE)
