"""Operator policy: the on-demand reserve (GPUs kept free for on-demand work, checked at lease confirmation) and
per-project queue priorities. Provider operators write them (`authorize_staff`); every change is audited."""
from __future__ import annotations

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.errors import ValidationFailed
from apps.inventory.catalog import gpu_model_get
from apps.tenancy.authz import authorize_staff

from ..models import OnDemandReserve, QueuePriority


def on_demand_reserve_set(*, actor, gpu_model: str, zone: str = "", gpus: int) -> OnDemandReserve:
    """Create or replace the reserve of `gpu_model` (in `zone`, or fleet-wide when empty). 400 for an unknown
    model or a negative count."""
    authorize_staff(actor)
    errors = {**({"gpu_model": ["not a GPU model of the catalog"]} if gpu_model_get(gpu_model) is None else {}),
              **({"gpus": ["must be >= 0"]} if gpus < 0 else {})}
    if errors:
        raise ValidationFailed("Invalid on-demand reserve.", errors=errors)
    with transaction.atomic():
        row, _ = OnDemandReserve.objects.select_for_update().update_or_create(
            gpu_model=gpu_model, zone=zone, defaults={"gpus": gpus})
        audit_record(actor=actor, action="reservations.reserve.set", target=row,
                     after={"gpu_model": gpu_model, "zone": zone, "gpus": gpus})
    return row


def on_demand_reserve_delete(*, actor, reserve: OnDemandReserve) -> None:
    authorize_staff(actor)
    with transaction.atomic():
        audit_record(actor=actor, action="reservations.reserve.delete", target=reserve,
                     before={"gpu_model": reserve.gpu_model, "zone": reserve.zone, "gpus": reserve.gpus})
        reserve.delete()


def queue_priority_set(*, actor, project, priority: int) -> QueuePriority:
    """Set the project's queue priority (higher goes first; applies to requests queued from now on)."""
    authorize_staff(actor)
    if not -1000 <= priority <= 1000:
        raise ValidationFailed("priority must be -1000..1000", errors={"priority": ["-1000..1000"]})
    with transaction.atomic():
        row, _ = QueuePriority.objects.update_or_create(project=project, defaults={"priority": priority})
        audit_record(actor=actor, action="reservations.queue_priority.set", target=row, project=project,
                     after={"priority": priority})
    return row
