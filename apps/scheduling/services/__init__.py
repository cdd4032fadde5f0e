"""Scheduling services: placement + claim (`placement_claim`), the staff dry run (`placement_candidates`)."""
from .placement import Placed, placement_candidates, placement_claim

__all__ = ["Placed", "placement_candidates", "placement_claim"]
