"""Metered usage and provider-caused downtime."""
from django.db import models

from apps.core.clock import now
from apps.core.models import UUIDModel

from ..states import PricingModel


class UsageRecord(UUIDModel):
    """One immutable piece of usage `[start, end)` of a resource, at most one metering hour long.

    `source_key` is unique: the recorder derives it from the usage source's interval key and the metering hour,
    so recording the same interval again inserts nothing (idempotent). `run_id` names one start of the resource
    (minimums apply per run). `commitment_*` are set for reserved commitments (a lease's committed price over
    `[commitment_start, commitment_end)`), billed whether used or not, prorated by the second.
    `gpu_equivalents` counts whole GPUs held (a MIG 3g.40gb slice on an 8-slice GPU is 0.375) for utilization
    reports. Rows are never updated or deleted (a database trigger refuses it).
    """

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.PROTECT, related_name="+")
    project = models.ForeignKey("tenancy.Project", on_delete=models.PROTECT, related_name="+")
    resource_type = models.CharField(max_length=32)
    resource_id = models.CharField(max_length=64)
    sku = models.CharField(max_length=200)
    pricing_model = models.CharField(max_length=16, choices=PricingModel.choices)
    sla_tier = models.CharField(max_length=32)
    start = models.DateTimeField()
    end = models.DateTimeField()
    run_id = models.CharField(max_length=200)
    source = models.CharField(max_length=64)
    source_key = models.CharField(max_length=300, unique=True)
    gpu_model = models.CharField(max_length=64, blank=True)
    gpu_equivalents = models.DecimalField(max_digits=9, decimal_places=4, default=0)
    units = models.DecimalField(max_digits=12, decimal_places=4, default=1,
                                help_text="units of the SKU held; the time charge is multiplied by it")
    commitment_amount = models.DecimalField(max_digits=18, decimal_places=6, null=True, blank=True)
    commitment_start = models.DateTimeField(null=True, blank=True)
    commitment_end = models.DateTimeField(null=True, blank=True)
    recorded_at = models.DateTimeField(default=now)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(end__gt=models.F("start")), name="billing_usage_end_after_start"),
            models.CheckConstraint(condition=models.Q(units__gt=0), name="billing_usage_units_positive"),
            models.CheckConstraint(
                condition=models.Q(commitment_amount__isnull=True)
                | models.Q(commitment_start__isnull=False, commitment_end__gt=models.F("commitment_start")),
                name="billing_usage_commitment_window"),
        ]
        indexes = [
            models.Index(fields=["organization", "start"]),
            models.Index(fields=["resource_type", "resource_id"]),
            models.Index(fields=["project", "start"]),
        ]

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


class DowntimeInterval(UUIDModel):
    """A resource unavailable `[start, end)` through the provider's fault (from an inventory Incident with
    `provider_at_fault`, mapped to resources by the registered placement resolvers). Usage inside it is not
    charged and it lowers the resource's monthly uptime.

    `units` null: the whole resource was down. Otherwise only `part` of it (e.g. one allocation row of a
    multi-host lease) was, worth `units` of the usage's unit (GPU equivalents for a lease): rating then leaves
    units/usage-units of the time uncharged, and the SLA counts the same share as downtime (docs/billing.md,
    "Downtime and SLA credits"). Intervals of one `part` are merged before weighting, so two incidents on the same
    part never count twice."""

    resource_type = models.CharField(max_length=32)
    resource_id = models.CharField(max_length=64)
    start = models.DateTimeField()
    end = models.DateTimeField()
    source = models.CharField(max_length=64, default="inventory.incident")
    source_key = models.CharField(max_length=300, unique=True)
    incident = models.ForeignKey("inventory.Incident", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    reason = models.CharField(max_length=500, blank=True)
    part = models.CharField(max_length=100, blank=True, help_text="the part of the resource that was down; '' = all")
    units = models.DecimalField(max_digits=20, decimal_places=10, null=True, blank=True,
                                help_text="units of the resource's usage the part is worth; null = the whole")

    class Meta:
        constraints = [models.CheckConstraint(condition=models.Q(end__gt=models.F("start")),
                                              name="billing_downtime_end_after_start")]
        indexes = [models.Index(fields=["resource_type", "resource_id", "start"])]


class LateUsage(UUIDModel):
    """A usage record that arrived after the invoice of its period was finalized (`source_invoice`), carried onto
    the organization's next open invoice (`invoice`) so it is billed once and never dropped. Looked for up to
    BILLING_LATE_LOOKBACK_DAYS (93) back."""

    usage_record = models.ForeignKey(UsageRecord, on_delete=models.PROTECT, related_name="+")
    source_invoice = models.ForeignKey("billing.Invoice", on_delete=models.PROTECT, related_name="+")
    invoice = models.ForeignKey("billing.Invoice", on_delete=models.CASCADE, related_name="late_usage")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["usage_record", "source_invoice"],
                                               name="billing_lateusage_once")]
