"""Repair of a failed GPU or host, the return-to-service check, host acceptance, and RMA records."""

from django.db import models

from apps.core.models import TimestampedModel

from ..states import OPEN_REPAIR, RepairAction, RepairKind, RepairStatus, RmaOutcome, RmaPart


class Repair(TimestampedModel):
    """One attempt to bring `gpu` (or the whole `host` when null) back into service (docs/health.md, "Repair").

    `action` (reset or reboot) runs through the agent once the device holds no tenant, then the return-to-service
    check (`check_command`); `result` stores what it answered: ``{tool, tool_version, driver_version, result,
    errors, warnings, exit_code, output_tail, passed}``. `attempt` counts the attempts on this device since its
    fault. An `acceptance` row is the same check on a newly enrolled host (no action). At most one open row per
    host and GPU."""

    host = models.ForeignKey("inventory.Host", on_delete=models.PROTECT, related_name="+")
    gpu = models.ForeignKey("inventory.Gpu", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    event = models.ForeignKey(
        "health.HealthEvent", on_delete=models.PROTECT, null=True, blank=True, related_name="repairs"
    )
    kind = models.CharField(max_length=12, choices=RepairKind.choices, default=RepairKind.REPAIR)
    action = models.CharField(max_length=12, choices=RepairAction.choices)
    status = models.CharField(max_length=12, choices=RepairStatus.choices, db_index=True)
    attempt = models.PositiveSmallIntegerField(default=1)
    repair_command = models.ForeignKey(
        "inventory.AgentCommand", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    check_command = models.ForeignKey(
        "inventory.AgentCommand", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    result = models.JSONField(default=dict, blank=True)
    reason = models.CharField(max_length=500, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["host", "gpu"],
                condition=models.Q(status__in=OPEN_REPAIR),
                name="health_repair_one_open",
                nulls_distinct=False,
            )
        ]


class Rma(TimestampedModel):
    """A part sent back to its vendor (Return Merchandise Authorization): opened when a device failed
    `HEALTH_RMA_AFTER_FAILED_REPAIRS` repairs within `HEALTH_RMA_WINDOW_SECONDS`, or at once when the fault's
    row says `rma`. The device stays out of service. Staff record the shipping and the outcome."""

    host = models.ForeignKey("inventory.Host", on_delete=models.PROTECT, related_name="+")
    gpu = models.ForeignKey("inventory.Gpu", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    part = models.CharField(max_length=8, choices=RmaPart.choices)
    serial = models.CharField(max_length=63, help_text="the part's serial (the GPU's board serial, or the host's)")
    model = models.CharField(max_length=64, blank=True)
    event = models.ForeignKey("health.HealthEvent", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    reason = models.CharField(max_length=500)
    failed_repairs = models.PositiveSmallIntegerField(default=0)
    opened_at = models.DateTimeField()
    shipped_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=12, choices=RmaOutcome.choices, blank=True)

    class Meta:
        ordering = ["-opened_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["host", "gpu"],
                condition=models.Q(closed_at__isnull=True),
                name="health_rma_one_open",
                nulls_distinct=False,
            )
        ]
