"""Capacity products: `Lease` (private-cloud reservation), `InstanceTerms` (how an instance draws capacity:
on-demand, spot or inside a lease), `QueuedRequest` (an on-demand request waiting for capacity),
`QueuePriority` (per-project queue priority), `OnDemandReserve` (GPUs the operator keeps free for on-demand),
and the notification outbox (`WebhookEndpoint`, `Notification`).

A lease's capacity is held in the allocation ledger (`apps.scheduling`) by allocations whose consumer id is the
lease id and whose period is the lease window `[start, end)`; nothing here duplicates those rows.
"""
from django.db import models
from django.db.models import F, Q

from apps.core.models import ProjectOwned, TimestampedModel

from .states import Channel, DeliveryStatus, EndAction, LeaseKind, LeaseStatus, Market, QueueStatus


class Lease(ProjectOwned):
    """Capacity reserved for a project over ``[start, end)`` (UTC, half-open: a lease ending at 12:00 and one
    starting at 12:00 do not overlap). `time_zone` is the IANA zone the tenant wrote the window in (display
    only; the instants are stored in UTC so DST changes cannot move them).

    Capacity: `kind` = hosts (`count` whole hosts of `gpu_model`, every GPU), gpus (`count` whole GPUs),
    mig (`count` GPU instances of `mig_profile`) or shares (`count` shares of `share_milli` milli-GPU).
    Topology (hosts): `max_leaves_per_rail` leaf switches per InfiniBand rail at most, one fabric.
    `end_action`: what happens to the lease's instances at the end. `notice_s`: seconds before `end` when the
    lease enters `ending` and the tenant is notified. `explanation`: the placement explanation of a refusal.
    """

    name = models.CharField(max_length=63)
    status = models.CharField(max_length=16, choices=LeaseStatus.choices, default=LeaseStatus.REQUESTED,
                              db_index=True)
    start = models.DateTimeField()
    end = models.DateTimeField()
    time_zone = models.CharField(max_length=64, default="UTC")
    kind = models.CharField(max_length=8, choices=LeaseKind.choices)
    gpu_model = models.CharField(max_length=32)
    count = models.PositiveIntegerField()
    mig_profile = models.CharField(max_length=32, blank=True)
    share_milli = models.PositiveIntegerField(default=0)
    zone = models.CharField(max_length=63, blank=True)
    max_leaves_per_rail = models.PositiveSmallIntegerField(null=True, blank=True)
    end_action = models.CharField(max_length=8, choices=EndAction.choices, default=EndAction.STOP)
    notice_s = models.PositiveIntegerField(default=3600)
    reason = models.CharField(max_length=1000, blank=True)
    explanation = models.JSONField(default=dict, blank=True)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    activated_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    sla_tier = models.CharField(max_length=32, blank=True, help_text=(
        "SLA tier code the lease is bought at (its usage records carry it); '' = the organization's default"))

    class Meta:
        ordering = ["start", "id"]
        indexes = [models.Index(fields=["status", "start"], name="resv_lease_status_start"),
                   models.Index(fields=["status", "end"], name="resv_lease_status_end")]
        constraints = [models.CheckConstraint(name="resv_lease_window", condition=Q(end__gt=F("start")))]

    def __str__(self) -> str:
        return self.name


class InstanceTerms(TimestampedModel):
    """How one compute instance draws capacity. `market` on_demand | spot | lease; `lease` when inside one.
    Spot: `interruption_at` is set once the instance is chosen for preemption (the owner sees
    `interruption_reason`); the instance is deleted at that instant (its grace period)."""

    instance = models.OneToOneField("compute.Instance", on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("tenancy.Project", on_delete=models.PROTECT, related_name="+")
    market = models.CharField(max_length=12, choices=Market.choices, default=Market.ON_DEMAND)
    lease = models.ForeignKey(Lease, on_delete=models.PROTECT, null=True, blank=True, related_name="terms")
    interruption_at = models.DateTimeField(null=True, blank=True)
    interruption_reason = models.CharField(max_length=500, blank=True)
    preempted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["market", "interruption_at"], name="resv_terms_market_int")]


class QueuedRequest(ProjectOwned):
    """An on-demand (or in-lease) instance, or a whole cluster (one entry: placed all-or-nothing), waiting for
    capacity; exactly one of `instance` and `cluster` is set. Order: higher `priority` first, then the
    organization with the fewest GPUs running (fair share), then `created_at`. `reason` is the latest placement
    refusal in words; `expires_at` = creation + the timeout the user chose."""

    instance = models.OneToOneField("compute.Instance", null=True, blank=True, on_delete=models.CASCADE,
                                    related_name="+")
    cluster = models.OneToOneField("compute.Cluster", null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="+")
    organization = models.ForeignKey("tenancy.Organization", on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=12, choices=QueueStatus.choices, default=QueueStatus.WAITING,
                              db_index=True)
    priority = models.IntegerField(default=0)
    gpus = models.PositiveIntegerField(default=0, help_text="whole-GPU equivalents asked (fair-share weight)")
    reason = models.CharField(max_length=1000, blank=True)
    explanation = models.JSONField(default=dict, blank=True)
    expires_at = models.DateTimeField()
    placed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-priority", "created_at"]
        constraints = [models.CheckConstraint(
            condition=models.Q(instance__isnull=False, cluster__isnull=True)
            | models.Q(instance__isnull=True, cluster__isnull=False), name="resv_queued_instance_or_cluster")]


class QueuePriority(TimestampedModel):
    """Queue priority of a project (staff set it; default 0; higher goes first)."""

    project = models.OneToOneField("tenancy.Project", on_delete=models.CASCADE, related_name="+")
    priority = models.IntegerField(default=0)


class OnDemandReserve(TimestampedModel):
    """GPUs of `gpu_model` (optionally in one zone) the operator keeps free for on-demand work: a lease is
    confirmed only if, at every instant of its window, at least `gpus` GPUs of the model stay unheld."""

    gpu_model = models.CharField(max_length=32)
    zone = models.CharField(max_length=63, blank=True)
    gpus = models.PositiveIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["gpu_model", "zone"], name="resv_reserve_model_zone")]


class WebhookEndpoint(TimestampedModel):
    """Where an organization receives notifications (HTTPS POST, JSON, signed with HMAC-SHA256 of
    ``"{timestamp}.{body}"`` under `secret`, header ``Gpucloud-Signature: t=<unix>,v1=<hex>``).
    `events`: event names (empty = all)."""

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.CASCADE, related_name="+")
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=128)
    events = models.JSONField(default=list, blank=True)
    is_active = models.BooleanField(default=True)


class Notification(TimestampedModel):
    """The outbox: one message to deliver, written in the transaction of the audit event it reports
    (`audit_event_id`). Retried with exponential backoff (`next_attempt_at`) until delivered or
    `attempts` reaches the limit (then `failed`)."""

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.CASCADE, related_name="+")
    channel = models.CharField(max_length=8, choices=Channel.choices)
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, null=True, blank=True,
                                 related_name="+")
    recipient = models.CharField(max_length=254, blank=True)
    event = models.CharField(max_length=64)
    payload = models.JSONField(default=dict)
    audit_event_id = models.UUIDField(null=True, blank=True)
    status = models.CharField(max_length=12, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(db_index=True)
    last_error = models.CharField(max_length=1000, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="resv_notif_due")]
