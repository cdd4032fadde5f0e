"""Fencing: powering a silent host off through its BMC before its VMs are re-created elsewhere (ADR 0218)."""

from django.conf import settings
from django.db import models

from apps.core.models import TimestampedModel

from ..states import OPEN_FENCE, FenceMethod, FenceStatus


class FenceDevice(TimestampedModel):
    """The BMC that fences a hypervisor host (a bare-metal host uses its node's BMC, `BaremetalNode`).

    `address`: the Redfish service's base URL; `system_id`: the ComputerSystem path (empty: the BMC's only
    system). The credentials are kept encrypted at rest (`apps.baremetal.services.secrets`, Fernet, the same keys
    as the bare-metal BMCs) and never returned by any API."""

    host = models.OneToOneField("inventory.Host", on_delete=models.CASCADE, related_name="fence_device")
    address = models.CharField(max_length=255, help_text="e.g. https://10.20.1.1 (Redfish)")
    system_id = models.CharField(max_length=255, blank=True, help_text="e.g. /redfish/v1/Systems/1")
    credentials_encrypted = models.TextField(help_text="Fernet token of the credentials' JSON")
    verify_tls = models.BooleanField(default=True)


class HostFence(TimestampedModel):
    """One fencing of `host` for `event` (a silent host): the BMC's power-off and its read-back, or a staff
    member's confirmation that the host is off. Only a `confirmed` fence lets the host's VMs be re-created.

    `deadline_at`: when an unconfirmed power-off gives up (`failed`); `power_state`: what the BMC read back last;
    `attempts`: power-off requests sent. At most one open (`pending`, `powering_off`) fence per host."""

    host = models.ForeignKey("inventory.Host", on_delete=models.PROTECT, related_name="+")
    event = models.ForeignKey("health.HealthEvent", on_delete=models.PROTECT, related_name="fences")
    status = models.CharField(max_length=16, choices=FenceStatus.choices, db_index=True)
    method = models.CharField(max_length=8, choices=FenceMethod.choices, blank=True)
    reason = models.CharField(max_length=500, blank=True)
    bmc_address = models.CharField(max_length=255, blank=True)
    power_state = models.CharField(max_length=16, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    deadline_at = models.DateTimeField(null=True, blank=True)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    confirmed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["host"], condition=models.Q(status__in=OPEN_FENCE), name="health_fence_one_open"
            )
        ]
