"""The provider's storage catalog: volume types (tiers), each backed by one storage pool."""
from django.db import models

from apps.core.models import TimestampedModel

from ..states import Backend


class VolumeType(TimestampedModel):
    """A tier of block storage, as data (Cinder's volume type): the pool that holds its volumes and what a tenant
    may expect of it.

    `pool`, `pool_kind`, `pool_target_path`, `pool_source` describe the backend pool (`drivers.base.PoolSpec`;
    for libvirt: a pool name, its type such as ``dir`` or ``logical``, its target directory and source device).
    `iops_class` / `throughput_class` are labels the provider publishes (e.g. ``standard``, ``high``), not
    enforced limits. `zones`: the zones that serve the type (none: every zone). `multi_attach`: a volume may be
    attached to several instances at once. `host_local`: the pool is on each hypervisor's own disks, so a volume
    lives on one host and attaches only to instances on that host. Volume sizes are whole GiB in
    [`min_size_gib`, `max_size_gib`]."""

    name = models.SlugField(max_length=63, unique=True)
    description = models.CharField(max_length=500, blank=True)
    backend = models.CharField(max_length=16, choices=Backend.choices, default=Backend.LIBVIRT)
    pool = models.CharField(max_length=63)
    pool_kind = models.CharField(max_length=16, default="dir")
    pool_target_path = models.CharField(max_length=500, blank=True)
    pool_source = models.CharField(max_length=500, blank=True)
    iops_class = models.CharField(max_length=32, blank=True)
    throughput_class = models.CharField(max_length=32, blank=True)
    zones = models.ManyToManyField("inventory.Zone", blank=True, related_name="+")
    multi_attach = models.BooleanField(default=False)
    host_local = models.BooleanField(default=False)
    min_size_gib = models.PositiveIntegerField(default=1)
    max_size_gib = models.PositiveIntegerField(default=16384)
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
