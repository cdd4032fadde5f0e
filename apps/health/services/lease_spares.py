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
or None), "gpus", "reason"}``.
"""

from __future__ import annotations

import logging

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


def lease_spares_replace(*, event: HealthEvent) -> list[dict]:
    """Move each lease the event touched off the event's host onto a free spare (see the module doc). Call in the
    ingest's transaction. Never raises for a lease it cannot move: the record says why."""
    at = now()
    out = []
    ids = event.impacts.filter(resource_type="lease").values_list("resource_id", flat=True)
    for lease in Lease.objects.filter(pk__in=list(ids)).exclude(status__in=LEASE_FINISHED).select_related(
        "project__organization"
    ):
        rows = list(_live_rows(lease.pk, event.host_id, at).select_related("gpu"))
        if not rows:
            continue
        gpu_rows = sorted((r for r in rows if r.resource_class == "gpu"), key=lambda r: r.gpu.index)
        record = {"lease": str(lease.pk), "from_host": event.host.name, "to_host": None, "gpus": len(gpu_rows)}
        if len(gpu_rows) + sum(r.resource_class in ("vcpu", "memory_mib") for r in rows) != len(rows):
            record["reason"] = "the lease holds fractional GPUs here (MIG, vGPU or shares): no host replacement"
        elif not gpu_rows:
            record["reason"] = "the lease holds no whole GPU here"
        else:
            record["reason"] = f"{NO_SPARE} with {len(gpu_rows)} {lease.gpu_model} GPUs: the lease stays held"
            for spare, spare_gpus in _free_spares(from_host=event.host, lease=lease, gpus=len(gpu_rows), at=at):
                mapping = {r.gpu_id: g for r, g in zip(gpu_rows, spare_gpus, strict=True)}
                try:
                    allocations_move_host(
                        consumer_id=lease.pk, from_host_id=event.host_id, to_host_id=spare.pk, gpu_map=mapping, at=at
                    )
                except DomainError as exc:  # taken meanwhile, or a countable that does not fit: the next one
                    log.info("lease %s: spare %s refused: %s", lease.pk, spare.name, exc.detail)
                    continue
                host_spare_set(
                    actor=None,
                    host=spare,
                    spare=False,
                    reason=f"replaces {event.host.name} for lease {lease.pk} ({event.classification})",
                )
                record.update(to_host=spare.name, reason="")
                break
        event_record(
            actor=None,
            action="health.lease.replace_host",
            target=lease,
            organization=lease.project.organization,
            project=lease.project,
            after=record,
        )
        out.append(record)
    return out


__all__ = ["NO_SPARE", "lease_held_on", "lease_spares_replace"]
