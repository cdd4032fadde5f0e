"""Scheduling services: placement + claim (`placement_claim`), the staff dry run (`placement_candidates`), and the
placement rule every create follows (`placement_admit`)."""
from .admission import (
    Admission,
    Unplaceable,
    capacity_unavailable,
    check_answer,
    check_refusal,
    earliest_fit,
    fleet_fit,
    placement_admit,
)
from .placement import Placed, placement_candidates, placement_claim

__all__ = ["Admission", "Placed", "Unplaceable", "capacity_unavailable", "check_answer",
           "check_refusal", "earliest_fit", "fleet_fit",
           "placement_admit", "placement_candidates", "placement_claim"]
