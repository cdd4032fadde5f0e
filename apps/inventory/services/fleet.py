"""Fleet import service: plan (dry run) or apply a fleet document, audited."""
from __future__ import annotations

from django.db import transaction

from apps.audit.services import audit_record

from ..errors import FleetInvalid
from ..fleet.sync import FleetPlan, fleet_apply, fleet_plan


def fleet_import(*, actor, document: str, dry_run: bool = True) -> FleetPlan:
    """Validate `document` and return its plan; with `dry_run=False` also apply it in one transaction.

    Raises FleetInvalid (400, `errors` = {"document": ["line N: ...", ...]}) when the file is invalid;
    nothing is written then.
    """
    plan = fleet_plan(document)
    if not plan.ok:
        raise FleetInvalid(f"The fleet file has {len(plan.errors)} error(s); nothing was written.",
                           errors={"document": [str(e) for e in plan.errors]})
    if dry_run or not plan.changes:
        return plan
    with transaction.atomic():
        summary = fleet_apply(plan)
        audit_record(actor=actor, action="inventory.fleet.import", target_type="inventory.fleet", target_id="fleet",
                     after=summary)
    return plan
