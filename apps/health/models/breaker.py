"""The blast-radius breaker: one incident on a shared component (a leaf switch) instead of N host drains."""

from django.conf import settings
from django.db import models

from apps.core.models import TimestampedModel


class ComponentIncident(TimestampedModel):
    """Hosts under one leaf switch failed together beyond the breaker's allowance (docs/health.md, "The
    breaker"): while open (`released_at` null) automatic host drains, cordons and VM moves stop for hosts
    under `switch`; their events are still recorded and counted here (`events_held`). Staff release it."""

    switch = models.ForeignKey("inventory.Switch", on_delete=models.PROTECT, related_name="+")
    opened_at = models.DateTimeField()
    released_at = models.DateTimeField(null=True, blank=True)
    released_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    hosts = models.JSONField(default=list, help_text="names of the hosts whose events it held or counted")
    hosts_under = models.PositiveIntegerField(help_text="hosts cabled to the switch when it opened")
    allowed = models.PositiveIntegerField(help_text="hosts the breaker let be taken out in the window")
    events_held = models.PositiveIntegerField(default=0)
    reason = models.CharField(max_length=500)

    class Meta:
        ordering = ["-opened_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["switch"],
                condition=models.Q(released_at__isnull=True),
                name="health_breaker_one_open",
            )
        ]
