"""Bare-metal nodes (staff-only, one per inventory host) and tenants' exit receipts."""
from django.db import models

from apps.core.models import ProjectOwned, TimestampedModel


class BaremetalNode(TimestampedModel):
    """An inventory host driven through the provisioning service (Ironic).

    `ironic_id` is the provisioning service's node id (empty until enrolled). The BMC credentials are kept
    encrypted at rest (`services.secrets`, Fernet): `bmc_username` and `bmc_password_encrypted` are never returned
    by the API. `provision_state`, `power_state`, `maintenance` and `last_error` mirror what the service last
    reported (`observed_at`); they are written only by `services.nodes.node_observe`. `held_reason` is ours: a
    node whose inspection differed from the host's catalog hardware (or whose cleaning failed) is held out of
    service with the difference named there until staff recover it. `inspection` is what inspection found.
    """

    host = models.OneToOneField("inventory.Host", on_delete=models.PROTECT, related_name="baremetal_node")
    ironic_id = models.CharField(max_length=64, blank=True, db_index=True)
    driver = models.CharField(max_length=32, help_text="Ironic hardware type: redfish, ipmi, fake-hardware")
    bmc_address = models.CharField(max_length=255, help_text="e.g. https://10.0.0.17 (Redfish)")
    bmc_system_id = models.CharField(max_length=255, blank=True, help_text="e.g. /redfish/v1/Systems/1")
    bmc_credentials_encrypted = models.TextField(blank=True, help_text="Fernet token of the credentials' JSON")
    provision_state = models.CharField(max_length=32, blank=True)
    power_state = models.CharField(max_length=16, blank=True)
    maintenance = models.BooleanField(default=False)
    maintenance_reason = models.CharField(max_length=500, blank=True)
    last_error = models.CharField(max_length=1000, blank=True)
    observed_at = models.DateTimeField(null=True, blank=True)
    held_reason = models.CharField(max_length=1000, blank=True)
    inspection = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["host__name"]

    def __str__(self) -> str:
        return f"node {self.host_id}"


class ExitReceipt(ProjectOwned):
    """The signed record of what was done when a bare-metal instance left its host (one per instance).

    `payload` is the exact UTF-8 JSON text that was signed (canonical: sorted keys, no spaces); `signature` is
    the Ed25519 signature of those bytes, base64; `key_id` names the deployment key (`GET
    /api/v1/bare-metal/receipt-key/`). The instance id is kept as a plain UUID so the receipt outlives nothing
    it depends on."""

    instance_id = models.UUIDField(unique=True)
    node = models.ForeignKey(BaremetalNode, on_delete=models.PROTECT, related_name="receipts")
    payload = models.TextField()
    signature = models.CharField(max_length=128)
    key_id = models.CharField(max_length=32)

    class Meta:
        ordering = ["-created_at"]
