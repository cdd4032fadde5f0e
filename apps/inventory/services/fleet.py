"""Fleet import service: plan (dry run) or apply a fleet document, audited."""
from __future__ import annotations

from django.db import transaction

from apps.audit.services import audit_record

from ..errors import FleetInvalid
from ..fleet.sync import FleetPlan, fleet_apply, fleet_plan
from ..models import Gpu
from .holders import gpu_guard_free


def _guard_mode_changes(plan: FleetPlan) -> None:
    """Refuse the plan when it changes the mode of a GPU held in the ledger (the host's ledger row stays locked
    until the import's transaction ends)."""
    for c in plan.changes:
        if c.kind == "gpu" and c.op == "update" and "mode" in c.values:
            host_name, index = c.key
            gpu = Gpu.objects.select_related("host").filter(host__name=host_name, index=index).first()
            if gpu is not None:
                gpu_guard_free(gpu, action=f"changing its mode to {c.values['mode']} (fleet import)")


def fleet_import(*, actor, document: str, dry_run: bool = True) -> FleetPlan:
    """Validate `document` and return its plan; with `dry_run=False` also apply it in one transaction.

    Raises FleetInvalid (400, `errors` = {"document": ["line N: ...", ...]}) when the file is invalid, and
    GpuAllocated (409 `gpu_allocated`, `holders`) when applying it would change the mode of a GPU that an allocation
    in the ledger holds (docs/adr/0503-re-slicing-guarded-by-the-ledger.md); nothing is written then.
    """
    plan = fleet_plan(document)
    if not plan.ok:
        raise FleetInvalid(f"The fleet file has {len(plan.errors)} error(s); nothing was written.",
                           errors={"document": [str(e) for e in plan.errors]})
    if dry_run or not plan.changes:
        return plan
    with transaction.atomic():
        _guard_mode_changes(plan)
        summary = fleet_apply(plan)
        audit_record(actor=actor, action="inventory.fleet.import", target_type="inventory.fleet", target_id="fleet",
                     after=summary)
    return plan
