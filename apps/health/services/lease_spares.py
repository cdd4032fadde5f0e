"""A lease's host replacement from the provider's spare pool (docs/health.md, "Spare hosts"; ADR 0215).

Called at ingest, in the event's transaction, for an event whose classification row re-creates VMs
(`recreate_vm`) when the breaker is closed, before the remediations open: every lease the event touched
(`HealthEventImpact` of type ``lease``) that still holds capacity on the event's host gets a **free spare host**:
a host in the spare pool (`Host.spare`), `available`, of the failed host's provisioning kind (and the lease's zone
when it names one), with at least as many healthy, scrubbed, exclusive-mode GPUs of the lease's GPU model as the
lease holds on the failed host, and no live or future allocation on it. The lease's rows on the failed host move
there through the allocation ledger (`allocations_move_host`, one transaction with the event) and the spare leaves
the pool (`host_spare_set`, audited). The lease's VMs on the failed host then open ordinary remediations
(`services.remediation`): their re-create, under the project's consent mode and after the checkpoint notice,
places them inside the lease, which now holds the spare. When no spare is free (or the lease holds fractional
rows there) the lease stays where it is and its VMs are `held` with that reason.

Returns one record per lease for ``event.applied["lease_spares"]``: ``{"lease", "from_host", "to_host" (host name
or None), "gpus", "reason"}``, and ``"held": true`` when it stays for want of a free spare: `lease_spares_backfill`
(staff adding a spare, a spare back in service, the beat) moves those later, oldest held first.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Q

from apps.core.clock import now
from apps.core.errors import DomainError
from apps.inventory.models import Gpu, Host
from apps.inventory.services.hosts import host_spare_set
from apps.inventory.states import GpuHealth, HostState
from apps.reservations.models import Lease
from apps.reservations.services.notify import event_record
from apps.reservations.states import LEASE_FINISHED
from apps.scheduling.ledger import allocations_move_host
from apps.scheduling.models import Allocation

from ..models import HealthEvent

log = logging.getLogger("gpucloud.health")
NO_SPARE = "no free spare host"


def _live_rows(lease_id, host_id, at):
    return Allocation.objects.filter(consumer_id=lease_id, host_id=host_id).filter(
        Q(period__upper_inf=True) | Q(period__endswith__gt=at)
    )


def lease_held_on(lease_id, host_id) -> bool:
    """Whether the lease still holds capacity on the host now (its rows were not moved to a spare)."""
    return _live_rows(lease_id, host_id, now()).exists()


def _free_spares(*, from_host: Host, lease: Lease, gpus: int, at):
    """Spare hosts that could take `gpus` GPUs of the lease's model now, locked (SKIP LOCKED), by name. Each with
    the ids of its first `gpus` eligible GPUs (by index)."""
    qs = Host.objects.filter(spare=True, state=HostState.AVAILABLE, provisioning_kind=from_host.provisioning_kind)
    qs = qs.exclude(pk=from_host.pk)
    if lease.zone:
        qs = qs.filter(zone__name=lease.zone)
    for host in qs.select_for_update(skip_locked=True).order_by("name"):
        busy = Allocation.objects.filter(host_id=host.pk).filter(Q(period__upper_inf=True) | Q(period__endswith__gt=at))
        if busy.exists():
            continue
        ids = list(
            Gpu.objects.filter(
                host=host, model=lease.gpu_model, mode="exclusive", health=GpuHealth.OK, scrub_state="clean"
            )
            .order_by("index")
            .values_list("pk", flat=True)[:gpus]
        )
        if len(ids) == gpus:
            yield host, ids


def _replace_one(*, lease: Lease, from_host: Host, at, why: str) -> dict | None:
    """Try to move `lease`'s live rows on `from_host` onto a free spare (`why`: the audit's and the spare's reason).
    Returns the record (``to_host`` None and ``reason`` when it stays), or None when it holds nothing there."""
    rows = list(_live_rows(lease.pk, from_host.pk, at).select_related("gpu"))
    if not rows:
        return None
    gpu_rows = sorted((r for r in rows if r.resource_class == "gpu"), key=lambda r: r.gpu.index)
    record = {"lease": str(lease.pk), "from_host": from_host.name, "to_host": None, "gpus": len(gpu_rows)}
    if len(gpu_rows) + sum(r.resource_class in ("vcpu", "memory_mib") for r in rows) != len(rows):
        record["reason"] = "the lease holds fractional GPUs here (MIG, vGPU or shares): no host replacement"
    elif not gpu_rows:
        record["reason"] = "the lease holds no whole GPU here"
    else:
        record.update(reason=f"{NO_SPARE} with {len(gpu_rows)} {lease.gpu_model} GPUs: the lease stays held", held=True)
        for spare, spare_gpus in _free_spares(from_host=from_host, lease=lease, gpus=len(gpu_rows), at=at):
            mapping = {r.gpu_id: g for r, g in zip(gpu_rows, spare_gpus, strict=True)}
            try:
                allocations_move_host(
                    consumer_id=lease.pk, from_host_id=from_host.pk, to_host_id=spare.pk, gpu_map=mapping, at=at
                )
            except DomainError as exc:  # taken meanwhile, or a countable that does not fit: the next one
                log.info("lease %s: spare %s refused: %s", lease.pk, spare.name, exc.detail)
                continue
            host_spare_set(
                actor=None, host=spare, spare=False, reason=f"replaces {from_host.name} for lease {lease.pk} ({why})"
            )
            record.update(to_host=spare.name, reason="")
            record.pop("held")
            break
    return record


def _audit(lease: Lease, record: dict) -> None:
    event_record(
        actor=None,
        action="health.lease.replace_host",
        target=lease,
        organization=lease.project.organization,
        project=lease.project,
        after=record,
    )


def lease_spares_replace(*, event: HealthEvent) -> list[dict]:
    """Move each lease the event touched off the event's host onto a free spare (see the module doc). Call in the
    ingest's transaction. Never raises for a lease it cannot move: the record says why."""
    at = now()
    out = []
    ids = event.impacts.filter(resource_type="lease").values_list("resource_id", flat=True)
    for lease in Lease.objects.filter(pk__in=list(ids)).exclude(status__in=LEASE_FINISHED).select_related(
        "project__organization"
    ):
        record = _replace_one(lease=lease, from_host=event.host, at=at, why=event.classification)
        if record is None:
            continue
        _audit(lease, record)
        out.append(record)
    return out


def _held_records(event: HealthEvent) -> list[dict]:
    return [r for r in (event.applied or {}).get("lease_spares", []) if r.get("held")]


def lease_spares_backfill(*, limit: int = 100) -> list[dict]:
    """Give free spares to the leases held for want of one (an event's ``applied.lease_spares`` record with
    ``held: true``: no free spare host at the time, the lease still holding capacity on the failed host), the
    oldest held first (by the event's record time). Each lease moves as at ingest (`allocations_move_host`, the
    spare leaves the pool, audit `health.lease.replace_host` with ``late: true`` and the event), the event's record
    gets ``to_host``, ``replaced_at`` and ``held: false``, and the lease's VMs still on the failed host open ordinary remediations
    (consent mode, checkpoint notice). A lease that ended or left the host meanwhile has its record closed with
    that reason. Idempotent: a moved lease is no longer held. Runs in the caller's transaction when there is one
    (staff marking a host spare, a spare back in service: `register_spare_ready_hook`), else each event in its own;
    the beat (`health.lease_spares_sweep_task`) runs it too, so a lease never waits for a missed trigger. Events
    are locked with SKIP LOCKED (a concurrent sweep skips them). Returns the records it moved."""
    from .remediation import remediations_open

    moved: list[dict] = []
    candidates = (
        HealthEvent.objects.filter(applied__lease_spares__contains=[{"held": True}])
        .order_by("created_at", "id")
        .values_list("pk", flat=True)[:limit]
    )
    for pk in list(candidates):
        with transaction.atomic():
            event = (
                HealthEvent.objects.select_for_update(skip_locked=True, of=("self",))
                .select_related("host")
                .filter(pk=pk)
                .first()
            )
            if event is None:
                continue
            at = now()
            changed = False
            for held in _held_records(event):
                lease = (
                    Lease.objects.select_related("project__organization").filter(pk=held["lease"]).first()
                )
                if lease is None or lease.status in LEASE_FINISHED or not lease_held_on(lease.pk, event.host_id):
                    held.update(held=False, reason="the lease ended or left the failed host before a spare was free")
                    changed = True
                    continue
                record = _replace_one(lease=lease, from_host=event.host, at=at, why=f"{event.classification}, late")
                if record is None or record["to_host"] is None:
                    continue
                held.update(to_host=record["to_host"], reason="", held=False, replaced_at=at.isoformat())
                changed = True
                _audit(lease, {**record, "event": str(event.pk), "late": True})
                remediations_open(event=event, lease_id=lease.pk)
                moved.append(record)
            if changed:
                HealthEvent.objects.filter(pk=event.pk).update(applied=event.applied, updated_at=at)
    return moved


def spare_ready(host: Host) -> None:
    """Inventory's spare-ready hook: `host` just joined the spare pool or came back to service as a spare; held
    leases get it now, in the caller's transaction (`lease_spares_backfill`)."""
    lease_spares_backfill()


__all__ = ["NO_SPARE", "lease_held_on", "lease_spares_backfill", "lease_spares_replace", "spare_ready"]
