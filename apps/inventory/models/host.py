"""Hosts (GPU servers) and incidents (faulty periods that billing reads for SLA downtime)."""
from django.contrib.postgres.fields import ArrayField
from django.db import models

from apps.core.models import TimestampedModel

from ..states import HostState, ProvisioningKind


class Host(TimestampedModel):
    """A physical server. Staff-only: tenants never see hosts or serials.

    `state` changes only through `apps.core.transitions.transition` with `states.HOST_TRANSITIONS`.
    `observed` is what the node agent last reported (free-form JSON, written only by agent services).
    """

    name = models.SlugField(max_length=63, unique=True, help_text="host name, unique in the fleet")
    zone = models.ForeignKey("inventory.Zone", on_delete=models.PROTECT, related_name="hosts")
    scalable_unit = models.ForeignKey("inventory.ScalableUnit", on_delete=models.PROTECT, null=True, blank=True,
                                      related_name="hosts")
    rack = models.ForeignKey("inventory.Rack", on_delete=models.PROTECT, null=True, blank=True,
                             related_name="hosts")
    rack_unit = models.PositiveSmallIntegerField(null=True, blank=True)
    vendor = models.CharField(max_length=63, blank=True)
    model = models.CharField(max_length=63, blank=True)
    serial = models.CharField(max_length=63, unique=True)
    bmc_address = models.CharField(max_length=255, blank=True)
    bmc_credentials_ref = models.CharField(max_length=255, blank=True,
                                           help_text="reference into the secret store, never the secret")
    cpu_sockets = models.PositiveSmallIntegerField(default=1)
    cpu_cores = models.PositiveIntegerField(default=1, help_text="physical cores, all sockets")
    cpu_threads = models.PositiveIntegerField(default=1, help_text="hardware threads, all sockets")
    memory_mib = models.PositiveBigIntegerField(default=0)
    numa_nodes = models.PositiveSmallIntegerField(default=1)
    provisioning_kind = models.CharField(max_length=16, choices=ProvisioningKind.choices,
                                         default=ProvisioningKind.HYPERVISOR)
    libvirt_uri = models.CharField(max_length=255, blank=True)
    nvswitch_system = models.CharField(max_length=32, blank=True,
                                       help_text="HGX baseboard key for NVSwitch partitions, e.g. hgx-8gpu")
    driver_version = models.CharField(max_length=32, blank=True, help_text="NVIDIA driver, e.g. 550.54.15")
    state = models.CharField(max_length=16, choices=HostState.choices, default=HostState.ENROLLING,
                             db_index=True)
    state_reason = models.CharField(max_length=500, blank=True)
    state_changed_at = models.DateTimeField(null=True, blank=True)
    active_partitions = ArrayField(models.PositiveSmallIntegerField(), default=list, blank=True,
                                   help_text="NVSwitch partition ids activated through Fabric Manager")
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    agent_version = models.CharField(max_length=32, blank=True)
    observed = models.JSONField(default=dict, blank=True)
    spare = models.BooleanField(default=False, help_text=(
        "held in the provider's spare pool: never used by on-demand, spot, queued or lease placement; only a "
        "lease's host replacement claims it (docs/health.md, \"Spare hosts\")"))

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Incident(TimestampedModel):
    """A faulty period of a host or a GPU: `[start, end)`, `end` null while open.

    Billing reads incidents with `provider_at_fault=True` as SLA downtime.
    """

    host = models.ForeignKey(Host, on_delete=models.PROTECT, related_name="incidents")
    gpu = models.ForeignKey("inventory.Gpu", on_delete=models.PROTECT, null=True, blank=True,
                            related_name="incidents", help_text="set when one GPU failed, null for the whole host")
    start = models.DateTimeField()
    end = models.DateTimeField(null=True, blank=True)
    reason = models.CharField(max_length=500)
    provider_at_fault = models.BooleanField(default=True)

    class Meta:
        ordering = ["-start"]
        constraints = [
            models.CheckConstraint(condition=models.Q(end__isnull=True) | models.Q(end__gt=models.F("start")),
                                   name="inventory_incident_end_after_start"),
            models.UniqueConstraint(fields=["host"], condition=models.Q(end__isnull=True, gpu__isnull=True),
                                    name="inventory_incident_one_open_per_host"),
        ]
