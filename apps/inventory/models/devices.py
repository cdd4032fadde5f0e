"""Devices of a host: GPUs and their slices (MIG GPU instances, SR-IOV VFs), NICs and IB HCA ports.

Which tenant holds a GPU, a slice, a vGPU or a VF is the allocation ledger's (apps.scheduling) and the instance's
`devices` (apps.compute), not a row here."""
from django.db import models

from apps.core.models import TimestampedModel

from ..states import GpuHealth, GpuMode, GpuScrub


class Gpu(TimestampedModel):
    """One physical GPU. `model` is a catalog key (`apps/inventory/catalog`), e.g. `H100-SXM5-80GB`.

    `nvlink_domain` names the NVLink/NVSwitch domain (GPUs that share it talk over NVLink); empty for PCIe GPUs.
    `observed` holds the agent's last report (PCIe gen/width, ECC, NVLink links, MIG mode).
    `scrub_state` is `clean` unless the GPU (or a MIG GPU instance, VF or NVSwitch partition on it) held a tenant
    and the agent's scrub has not finished (`dirty`) or failed (`scrub_failed`); `scrub_commands` are the agent
    command ids the scrub waits for (written only by `apps.inventory.services.scrub`).
    """

    host = models.ForeignKey("inventory.Host", on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField(help_text="NVML device index / Fabric Manager GPU physical id - 1")
    model = models.CharField(max_length=32, db_index=True)
    uuid = models.CharField(max_length=64, unique=True, help_text="NVML UUID, GPU-xxxxxxxx-...")
    serial = models.CharField(max_length=63, unique=True)
    pci_address = models.CharField(max_length=16, help_text="domain:bus:device.function, e.g. 0000:18:00.0")
    numa_node = models.PositiveSmallIntegerField(default=0)
    nvlink_domain = models.CharField(max_length=63, blank=True)
    mode = models.CharField(max_length=16, choices=GpuMode.choices, default=GpuMode.EXCLUSIVE)
    health = models.CharField(max_length=16, choices=GpuHealth.choices, default=GpuHealth.OK)
    observed = models.JSONField(default=dict, blank=True)
    scrub_state = models.CharField(max_length=16, choices=GpuScrub.choices, default=GpuScrub.CLEAN, db_index=True)
    scrub_reason = models.CharField(max_length=500, blank=True)
    scrub_commands = models.JSONField(default=list, blank=True, help_text="agent command ids the scrub waits for")
    scrub_changed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["host__name", "index"]
        constraints = [models.UniqueConstraint(fields=["host", "index"], name="inventory_gpu_host_index_uniq")]

    def __str__(self) -> str:
        return f"{self.host.name}/gpu{self.index}"


class GpuInstance(TimestampedModel):
    """A MIG GPU instance: memory slices `[start, start + size)` of an 8-slice GPU (NVIDIA MIG User Guide)."""

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="gpu_instances")
    profile_id = models.PositiveSmallIntegerField(help_text="MIG GPU instance profile id, e.g. 9")
    profile = models.CharField(max_length=32, help_text="profile name, e.g. 3g.40gb")
    start = models.PositiveSmallIntegerField(help_text="first memory slice")
    size = models.PositiveSmallIntegerField(help_text="memory slices")
    gi_id = models.PositiveSmallIntegerField(null=True, blank=True, help_text="driver GPU instance id")

    class Meta:
        ordering = ["gpu", "start"]
        constraints = [
            models.UniqueConstraint(fields=["gpu", "start"], name="inventory_gi_gpu_start_uniq"),
            models.CheckConstraint(condition=models.Q(size__gte=1, size__lte=8), name="inventory_gi_size_range"),
        ]


class VirtualFunction(TimestampedModel):
    """An SR-IOV virtual function of a GPU (NVIDIA vendor VFIO, Hopper and later) or of an HCA port.

    For HCA VFs `virtual_guid` is the port GUID assigned from the port's pool.
    """

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, null=True, blank=True, related_name="virtual_functions")
    hca_port = models.ForeignKey("inventory.HcaPort", on_delete=models.CASCADE, null=True, blank=True,
                                 related_name="virtual_functions")
    index = models.PositiveSmallIntegerField()
    pci_address = models.CharField(max_length=16, blank=True)
    virtual_guid = models.CharField(max_length=18, blank=True)

    class Meta:
        ordering = ["pci_address", "index"]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(gpu__isnull=False, hca_port__isnull=True)
                           | models.Q(gpu__isnull=True, hca_port__isnull=False)),
                name="inventory_vf_one_parent"),
            models.UniqueConstraint(fields=["gpu", "index"], name="inventory_vf_gpu_index_uniq"),
            models.UniqueConstraint(fields=["hca_port", "index"], name="inventory_vf_port_index_uniq"),
        ]


class Nic(TimestampedModel):
    """An Ethernet port of a host, optionally cabled to a switch port."""

    host = models.ForeignKey("inventory.Host", on_delete=models.CASCADE, related_name="nics")
    name = models.CharField(max_length=32, help_text="interface name, e.g. eth0")
    mac_address = models.CharField(max_length=17, unique=True)
    fabric = models.ForeignKey("inventory.Fabric", on_delete=models.PROTECT, null=True, blank=True,
                               related_name="nics")
    speed_gbps = models.PositiveIntegerField(default=0)
    pci_address = models.CharField(max_length=16, blank=True)
    numa_node = models.PositiveSmallIntegerField(default=0)
    switch = models.ForeignKey("inventory.Switch", on_delete=models.PROTECT, null=True, blank=True,
                               related_name="nics")
    switch_port = models.PositiveSmallIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["host__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["host", "name"], name="inventory_nic_host_name_uniq"),
            models.UniqueConstraint(fields=["switch", "switch_port"], name="inventory_nic_switch_port_uniq"),
        ]


class HcaPort(TimestampedModel):
    """An InfiniBand HCA port: physical `port_guid`, LID (assigned by the SM), fabric, rail, leaf switch + port."""

    host = models.ForeignKey("inventory.Host", on_delete=models.CASCADE, related_name="hca_ports")
    device = models.CharField(max_length=32, help_text="RDMA device name, e.g. mlx5_0")
    port_number = models.PositiveSmallIntegerField(default=1)
    port_guid = models.CharField(max_length=18, unique=True, help_text="0x-prefixed 64-bit port GUID")
    lid = models.PositiveIntegerField(null=True, blank=True)
    fabric = models.ForeignKey("inventory.Fabric", on_delete=models.PROTECT, related_name="hca_ports")
    rail = models.PositiveSmallIntegerField(null=True, blank=True)
    leaf_switch = models.ForeignKey("inventory.Switch", on_delete=models.PROTECT, null=True, blank=True,
                                    related_name="hca_ports")
    leaf_port = models.PositiveSmallIntegerField(null=True, blank=True)
    rate_gbps = models.PositiveIntegerField(default=400)
    pci_address = models.CharField(max_length=16, blank=True)
    numa_node = models.PositiveSmallIntegerField(default=0)
    max_vfs = models.PositiveSmallIntegerField(default=0, help_text="SR-IOV VFs enabled on this port")

    class Meta:
        ordering = ["host__name", "device", "port_number"]
        constraints = [
            models.UniqueConstraint(fields=["host", "device", "port_number"], name="inventory_hca_dev_port_uniq"),
            models.UniqueConstraint(fields=["leaf_switch", "leaf_port"], name="inventory_hca_leaf_port_uniq"),
        ]
