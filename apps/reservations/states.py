"""Lease, queued-request and notification states with their transition tables (`apps.core.transitions`).

Lease lifecycle (docs/reservations.md)::

    requested --confirm--> confirmed --activate--> active --notice--> ending --finish--> ended
        |                     |                      |                  |
        +--reject--> rejected +--cancel--> cancelled +--cancel----------+--> cancelled

`requested` lasts only while the lease's capacity is being claimed (the create request); a lease whose claim
fails is kept as `rejected` with the explanation, so the tenant sees why.
"""
from django.db import models


class LeaseStatus(models.TextChoices):
    REQUESTED = "requested"
    CONFIRMED = "confirmed"
    ACTIVE = "active"
    ENDING = "ending"
    ENDED = "ended"
    CANCELLED = "cancelled"
    REJECTED = "rejected"


LEASE_LIVE = (LeaseStatus.CONFIRMED, LeaseStatus.ACTIVE, LeaseStatus.ENDING)
LEASE_STARTED = (LeaseStatus.ACTIVE, LeaseStatus.ENDING)
LEASE_FINISHED = (LeaseStatus.ENDED, LeaseStatus.CANCELLED, LeaseStatus.REJECTED)

LEASE_TRANSITIONS = {
    "confirm": ({LeaseStatus.REQUESTED}, LeaseStatus.CONFIRMED),
    "reject": ({LeaseStatus.REQUESTED}, LeaseStatus.REJECTED),
    "activate": ({LeaseStatus.CONFIRMED}, LeaseStatus.ACTIVE),
    "notice": ({LeaseStatus.ACTIVE}, LeaseStatus.ENDING),
    "finish": ({LeaseStatus.ACTIVE, LeaseStatus.ENDING}, LeaseStatus.ENDED),
    "cancel": ({LeaseStatus.REQUESTED, LeaseStatus.CONFIRMED, LeaseStatus.ACTIVE, LeaseStatus.ENDING},
               LeaseStatus.CANCELLED),
    # extend / shrink keep the state; an extended `ending` lease goes back to `active` when the notice moves
    "renew": ({LeaseStatus.ENDING}, LeaseStatus.ACTIVE),
}


class LeaseKind(models.TextChoices):
    """What a lease holds: whole hosts of a GPU model (all their GPUs), or whole GPUs, MIG slices of one
    profile, or fractional shares."""

    HOSTS = "hosts"
    GPUS = "gpus"
    MIG = "mig"
    SHARES = "shares"


class EndAction(models.TextChoices):
    STOP = "stop"
    DELETE = "delete"


class Market(models.TextChoices):
    ON_DEMAND = "on_demand"
    SPOT = "spot"
    LEASE = "lease"


class QueueStatus(models.TextChoices):
    WAITING = "waiting"
    PLACED = "placed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


QUEUE_TRANSITIONS = {
    "place": ({QueueStatus.WAITING}, QueueStatus.PLACED),
    "expire": ({QueueStatus.WAITING}, QueueStatus.EXPIRED),
    "cancel": ({QueueStatus.WAITING}, QueueStatus.CANCELLED),
}


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


class Channel(models.TextChoices):
    WEBHOOK = "webhook"
    EMAIL = "email"


class Event(models.TextChoices):
    """Notification events (webhook `event` field, e-mail subject)."""

    LEASE_CONFIRMED = "lease.confirmed"
    LEASE_STARTING = "lease.starting"
    LEASE_ENDING_SOON = "lease.ending_soon"
    LEASE_ENDED = "lease.ended"
    SPOT_PREEMPTION = "spot.preemption_notice"
    # apps.health: a VM on a failed GPU or host (docs/health.md, remediation)
    REMEDIATION_NOTICE = "remediation.notice"
    REMEDIATION_PROPOSED = "remediation.proposed"
    REMEDIATION_HELD = "remediation.held"
    REMEDIATION_FINISHED = "remediation.finished"
    # apps.health: a health event on a device that held the organization's resources, and the provider-fault
    # incident it opened / the repair that closed it (docs/health.md, "Visibility")
    HEALTH_EVENT = "health.event"
    HEALTH_INCIDENT_OPENED = "health.incident.opened"
    HEALTH_INCIDENT_CLOSED = "health.incident.closed"
