"""Scheduling error codes (stable, snake_case) and the exceptions that carry them.

`capacity_unavailable` is HTTP 409 (docs/adr/0401-capacity-unavailable-status.md): the request is valid, the
fleet's current state cannot hold it. The problem document carries ``explanation`` (per-filter counts).
"""
from __future__ import annotations

from enum import StrEnum

from apps.core.errors import Conflict, ValidationFailed


class Code(StrEnum):
    CAPACITY_UNAVAILABLE = "capacity_unavailable"
    CONSUMER_GENERATION_CONFLICT = "consumer_generation_conflict"
    INVALID_ALLOCATION = "invalid_allocation"
    INVALID_PLACEMENT_REQUEST = "invalid_placement_request"
    CONSUMER_TYPE_MISMATCH = "consumer_type_mismatch"
    UNPLACEABLE = "unplaceable"


class CapacityUnavailable(Conflict):
    """Nothing can hold the request (409). ``explanation`` lists how many hosts each filter removed and why."""

    code, status, title = Code.CAPACITY_UNAVAILABLE.value, 409, "Capacity unavailable"

    def __init__(self, detail: str = "", *, explanation: dict | None = None, **extra):
        super().__init__(detail or "No capacity can hold the request.",
                         explanation=explanation or {}, **extra)
        self.explanation = explanation or {}


class ConsumerGenerationConflict(Conflict):
    """The consumer's allocations changed since the caller read them (409); re-read and retry."""

    code, status, title = Code.CONSUMER_GENERATION_CONFLICT.value, 409, "Consumer generation conflict"


class InvalidAllocation(ValidationFailed):
    """An allocation spec that cannot be valid whatever the fleet holds (400)."""

    code, title = Code.INVALID_ALLOCATION.value, "Invalid allocation"


class InvalidPlacementRequest(ValidationFailed):
    code, title = Code.INVALID_PLACEMENT_REQUEST.value, "Invalid placement request"
