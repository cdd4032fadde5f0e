"""Health events: one fault signal about a host, optionally one GPU or HCA port, and who it touched."""

from django.db import models

from apps.core.models import TimestampedModel

from ..states import EventKind, EventSource


class HealthEvent(TimestampedModel):
    """A fault signal as reported (agent, staff injection, control plane), with its classification.

Where: the host, and optionally one GPU, one HCA port, or one NVSwitch of the host (its PCI address, and the port
the SXid names).

    `dedup_key` is unique per host: the agent's own key for the signal (or one derived from host, device, kind,
    xid and observed_at), so a re-sent event is answered from the stored row and counted once.
    `classification` / `classification_version` / `effects` record what the rules decided at ingest.
    """

    host = models.ForeignKey("inventory.Host", on_delete=models.PROTECT, related_name="health_events")
    gpu = models.ForeignKey(
        "inventory.Gpu", on_delete=models.PROTECT, null=True, blank=True, related_name="health_events"
    )
    hca_port = models.ForeignKey(
        "inventory.HcaPort", on_delete=models.PROTECT, null=True, blank=True, related_name="health_events"
    )
    kind = models.CharField(max_length=32, choices=EventKind.choices)
    xid = models.PositiveIntegerField(
        null=True, blank=True, help_text="NVIDIA XID number (kind xid) or NVSwitch SXid number (kinds nvswitch_*)"
    )
    nvswitch = models.CharField(
        max_length=16, blank=True, help_text="the NVSwitch's PCI address (kinds nvswitch_*), e.g. 0000:05:00.0"
    )
    nvswitch_port = models.PositiveIntegerField(
        null=True, blank=True, help_text="the NVSwitch port (link) the SXid names, if any"
    )
    count = models.PositiveIntegerField(default=1, help_text="occurrences this report stands for")
    observed_at = models.DateTimeField()
    dedup_key = models.CharField(max_length=128)
    source = models.CharField(max_length=16, choices=EventSource.choices, default=EventSource.AGENT)
    message = models.CharField(max_length=500, blank=True)
    classification = models.CharField(max_length=64, blank=True)
    classification_version = models.PositiveIntegerField(default=0)
    effects = models.JSONField(default=list, blank=True, help_text="effects the matched row names")
    applied = models.JSONField(
        default=dict, blank=True, help_text="what ingest did: applied effects, pending hooks, incident id"
    )
    needs_return_to_service = models.BooleanField(default=False)

    class Meta:
        ordering = ["-observed_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["host", "dedup_key"], name="health_event_dedup")]
        indexes = [models.Index(fields=["host", "gpu", "kind", "observed_at"], name="health_event_window")]


class HealthEventImpact(models.Model):
    """A tenant resource that held the event's GPU (or host) when it was observed; the tenant's view of it."""

    event = models.ForeignKey(HealthEvent, on_delete=models.CASCADE, related_name="impacts")
    project = models.ForeignKey("tenancy.Project", on_delete=models.PROTECT, related_name="+")
    resource_type = models.CharField(max_length=16)
    resource_id = models.UUIDField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["event", "resource_id"], name="health_impact_once")]
