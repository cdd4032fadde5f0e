"""Reservation error codes (stable, snake_case). Capacity refusals reuse scheduling's `capacity_unavailable`
(409) with the placement explanation; the reserve check adds ``constraint: on_demand_reserve``."""
from enum import StrEnum

from apps.core.errors import Conflict, ValidationFailed


class Code(StrEnum):
    INVALID_WINDOW = "invalid_lease_window"
    START_IN_PAST = "lease_start_in_past"
    TOO_LONG = "lease_too_long"
    IMMUTABLE_FIELD = "lease_field_immutable"
    INVALID_CAPACITY = "invalid_lease_capacity"
    CAPACITY_UNAVAILABLE = "capacity_unavailable"
    LEASE_NOT_USABLE = "lease_not_usable"
    QUEUE_EXPIRED = "queue_expired"
    SPOT_PREEMPTED = "spot_preempted"


class InvalidWindow(ValidationFailed):
    code, title = Code.INVALID_WINDOW.value, "Invalid lease window"


class LeaseNotUsable(Conflict):
    code, title = Code.LEASE_NOT_USABLE.value, "Lease not usable"
