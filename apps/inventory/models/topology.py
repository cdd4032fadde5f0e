"""Physical topology: Region -> Zone -> ScalableUnit -> Rack; fabrics, subnet managers, switches and links."""
from django.db import models

from apps.core.models import TimestampedModel

from ..states import FabricKind, SubnetManagerRole, SwitchRole


class Region(TimestampedModel):
    """A geographic region (e.g. `eu-west`). `name` is a stable slug."""

    name = models.SlugField(max_length=63, unique=True)
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Zone(TimestampedModel):
    """A failure domain inside a region. `name` is globally unique (e.g. `eu-west-a`)."""

    region = models.ForeignKey(Region, on_delete=models.PROTECT, related_name="zones")
    name = models.SlugField(max_length=63, unique=True)
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ScalableUnit(TimestampedModel):
    """A block of hosts that share leaf switches (a DGX SuperPOD "SU"). Unique per zone."""

    zone = models.ForeignKey(Zone, on_delete=models.PROTECT, related_name="scalable_units")
    name = models.SlugField(max_length=63)

    class Meta:
        ordering = ["zone__name", "name"]
        constraints = [models.UniqueConstraint(fields=["zone", "name"], name="inventory_su_zone_name_uniq")]

    def __str__(self) -> str:
        return f"{self.zone.name}/{self.name}"


class Rack(TimestampedModel):
    """A rack in a zone, optionally part of a scalable unit. Unique per zone."""

    zone = models.ForeignKey(Zone, on_delete=models.PROTECT, related_name="racks")
    scalable_unit = models.ForeignKey(ScalableUnit, on_delete=models.PROTECT, null=True, blank=True,
                                      related_name="racks")
    name = models.SlugField(max_length=63)

    class Meta:
        ordering = ["zone__name", "name"]
        constraints = [models.UniqueConstraint(fields=["zone", "name"], name="inventory_rack_zone_name_uniq")]

    def __str__(self) -> str:
        return f"{self.zone.name}/{self.name}"


class Fabric(TimestampedModel):
    """An InfiniBand or Ethernet network. IB fabrics have subnet managers; partitions belong to one fabric."""

    name = models.SlugField(max_length=63, unique=True)
    kind = models.CharField(max_length=16, choices=FabricKind.choices)
    region = models.ForeignKey(Region, on_delete=models.PROTECT, related_name="fabrics")
    purpose = models.CharField(max_length=32, blank=True, help_text="compute | storage | tenant | management")
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class SubnetManager(TimestampedModel):
    """An InfiniBand subnet manager instance (OpenSM or UFM) of a fabric; `priority` 0..15 per IBA spec."""

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="subnet_managers")
    name = models.CharField(max_length=63)
    role = models.CharField(max_length=16, choices=SubnetManagerRole.choices)
    priority = models.PositiveSmallIntegerField(default=0)
    address = models.CharField(max_length=255, blank=True, help_text="management address or host name")
    port_guid = models.CharField(max_length=18, blank=True, help_text="0x-prefixed 64-bit GUID")

    class Meta:
        ordering = ["fabric__name", "-priority", "name"]
        constraints = [models.UniqueConstraint(fields=["fabric", "name"], name="inventory_sm_fabric_name_uniq")]


class Switch(TimestampedModel):
    """A leaf, spine or core switch of one fabric. Leaves serve one rail of one scalable unit."""

    name = models.SlugField(max_length=63, unique=True)
    fabric = models.ForeignKey(Fabric, on_delete=models.PROTECT, related_name="switches")
    role = models.CharField(max_length=8, choices=SwitchRole.choices)
    zone = models.ForeignKey(Zone, on_delete=models.PROTECT, null=True, blank=True, related_name="switches")
    scalable_unit = models.ForeignKey(ScalableUnit, on_delete=models.PROTECT, null=True, blank=True,
                                      related_name="switches")
    rack = models.ForeignKey(Rack, on_delete=models.PROTECT, null=True, blank=True, related_name="switches")
    rail = models.PositiveSmallIntegerField(null=True, blank=True, help_text="rail number for leaf switches")
    model = models.CharField(max_length=63, blank=True)
    port_count = models.PositiveSmallIntegerField(default=64)
    node_guid = models.CharField(max_length=18, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class SwitchLink(TimestampedModel):
    """A cable between two switch ports (port numbers are 1-based). A port carries at most one link."""

    a_switch = models.ForeignKey(Switch, on_delete=models.CASCADE, related_name="links_a")
    a_port = models.PositiveSmallIntegerField()
    b_switch = models.ForeignKey(Switch, on_delete=models.CASCADE, related_name="links_b")
    b_port = models.PositiveSmallIntegerField()

    class Meta:
        ordering = ["a_switch__name", "a_port"]
        constraints = [
            models.UniqueConstraint(fields=["a_switch", "a_port"], name="inventory_link_a_port_uniq"),
            models.UniqueConstraint(fields=["b_switch", "b_port"], name="inventory_link_b_port_uniq"),
        ]
