"""Remediation: moving one tenant VM off a failed GPU or host, under its project's consent mode."""

from django.conf import settings
from django.db import models

from apps.core.models import ProjectOwned, TimestampedModel

from ..states import OPEN_REMEDIATION, ConsentMode, RemediationStatus


class RemediationPolicy(TimestampedModel):
    """A project's consent mode and checkpoint notice length; a project without a row gets the defaults
    (`HEALTH_CONSENT_MODE_DEFAULT`, `HEALTH_NOTICE_SECONDS_DEFAULT`)."""

    project = models.OneToOneField("tenancy.Project", on_delete=models.CASCADE, related_name="+")
    consent_mode = models.CharField(max_length=8, choices=ConsentMode.choices)
    notice_seconds = models.PositiveIntegerField(
        help_text="seconds between the checkpoint notice and an auto move"
    )


class Remediation(ProjectOwned):
    """One VM (`resource_id`, an instance) to re-create off `from_host` because of `event`.

    `deadline_at`: when an `auto` remediation moves (the checkpoint notice's deadline). `operation`: the
    `instance.recreate` operation once started. At most one open remediation per instance."""

    event = models.ForeignKey("health.HealthEvent", on_delete=models.PROTECT, related_name="remediations")
    resource_type = models.CharField(max_length=16, default="instance")
    resource_id = models.UUIDField()
    from_host = models.ForeignKey("inventory.Host", on_delete=models.PROTECT, related_name="+")
    to_host = models.ForeignKey(
        "inventory.Host", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    consent_mode = models.CharField(max_length=8, choices=ConsentMode.choices)
    status = models.CharField(max_length=12, choices=RemediationStatus.choices, db_index=True)
    reason = models.CharField(max_length=500, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)
    operation = models.ForeignKey(
        "operations.Operation", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["resource_id"],
                condition=models.Q(status__in=OPEN_REMEDIATION),
                name="health_remediation_one_open",
            )
        ]
