"""The allocation ledger: who holds which GPU, GPU slice, vGPU, VF, GPU share, vCPUs and memory, and when.

Design: docs/adr/0400-allocation-ledger.md. In short:

* Every GPU has 8 memory slices (NVIDIA MIG User Guide, "memory axis = 8 slices"). A whole GPU is the
  slice range ``[0, 8)``; a MIG GPU instance ``3g.40gb`` at start 4 is ``[4, 8)``.
* ``period`` is a half-open ``tstzrange [start, end)``; ``end`` is open (NULL) for running on-demand work.
* Two PostgreSQL exclusion constraints (btree_gist) make overlapping slice allocations impossible:

  - ``holders``: top-level (no parent) non-spot rows - leases and on-demand work - never overlap;
  - ``workloads``: rows whose consumer is not a lease - on-demand, spot, and instances nested in a lease -
    never overlap.

  So a spot row may overlap a lease (spot never blocks a lease; it is preempted at the lease's start), an
  instance nested in a lease does not conflict with the lease itself but does with its siblings and with spot.
* Countable resources (vGPUs of a type, VFs, GPU shares in milli-GPU, vCPUs, memory in MiB) carry an
  ``amount`` and are checked by a sum under the host's ``HostUsage`` row lock (hosts locked in id order).
"""
from __future__ import annotations

from django.contrib.postgres.constraints import ExclusionConstraint
from django.contrib.postgres.fields import ArrayField, DateTimeRangeField, IntegerRangeField, RangeOperators
from django.db import models
from django.db.backends.postgresql.psycopg_any import NumericRange
from django.db.models import F, Q

from apps.core.clock import now
from apps.core.ids import uuid7

#: Memory slices per GPU (NVIDIA MIG User Guide: the memory axis has 8 slices on every MIG-capable part).
GPU_SLICES = 8


class ConsumerType(models.TextChoices):
    INSTANCE = "instance", "Instance"
    CLUSTER_MEMBER = "cluster_member", "Cluster member"
    LEASE = "lease", "Lease"


class ResourceClass(models.TextChoices):
    """What one allocation row holds. ``amount`` unit in brackets."""

    GPU = "gpu", "Whole GPU (slices [0, 8))"
    MIG = "mig", "MIG GPU instance (a slice range)"
    VGPU = "vgpu", "vGPU of a type [count]"
    VF = "vf", "SR-IOV virtual function of a GPU [count]"
    SHARE = "share", "Fractional GPU share [milli-GPU, 1000 = one GPU]"
    VCPU = "vcpu", "vCPUs [count]"
    MEMORY = "memory_mib", "Memory [MiB]"


SLICE_CLASSES = frozenset({ResourceClass.GPU, ResourceClass.MIG})
GPU_COUNTABLE_CLASSES = frozenset({ResourceClass.VGPU, ResourceClass.VF, ResourceClass.SHARE})
HOST_COUNTABLE_CLASSES = frozenset({ResourceClass.VCPU, ResourceClass.MEMORY})


class Consumer(models.Model):
    """Whatever holds capacity. ``id`` is the consumer's own id (the instance, cluster member or lease UUID).

    ``generation`` is an optimistic counter (OpenStack Placement's consumer generation, microversion 1.28):
    every write of the consumer's allocations increments it; a writer that read an older value gets 409.
    ``group`` names an affinity / anti-affinity group (empty when none).
    """

    id = models.UUIDField(primary_key=True)
    consumer_type = models.CharField(max_length=16, choices=ConsumerType.choices)
    project = models.ForeignKey("tenancy.Project", on_delete=models.PROTECT, related_name="+")
    generation = models.PositiveBigIntegerField(default=0)
    group = models.CharField(max_length=100, blank=True, db_index=True)
    dedicated = models.BooleanField(default=False, help_text="wants hosts no other project uses")
    created_at = models.DateTimeField(default=now, editable=False)
    updated_at = models.DateTimeField(default=now)

    class Meta:
        indexes = [models.Index(fields=["project", "consumer_type"], name="sched_consumer_proj_type")]

    def __str__(self) -> str:
        return f"{self.consumer_type}:{self.id}"


class Allocation(models.Model):
    """One consumer holds one resource on one host (and GPU) over ``period`` = ``[start, end)``.

    ``consumer_type`` and ``project`` repeat the consumer's (the constraints and quota counting need them on
    the row). ``parent`` is the lease's allocation this row nests in. Rows are written only by
    `apps.scheduling.ledger`.
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    consumer = models.ForeignKey(Consumer, on_delete=models.CASCADE, related_name="allocations")
    consumer_type = models.CharField(max_length=16, choices=ConsumerType.choices)
    project = models.ForeignKey("tenancy.Project", on_delete=models.PROTECT, related_name="+")
    host = models.ForeignKey("inventory.Host", on_delete=models.PROTECT, related_name="+")
    gpu = models.ForeignKey("inventory.Gpu", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    resource_class = models.CharField(max_length=16, choices=ResourceClass.choices)
    slices = IntegerRangeField(null=True, blank=True, help_text="memory slices [a, b) of the GPU (gpu, mig)")
    amount = models.PositiveBigIntegerField(default=1, help_text="count, MiB or milli-GPU (see resource_class)")
    profile = models.CharField(max_length=32, blank=True, help_text="MIG profile name or vGPU type")
    period = DateTimeRangeField(help_text="[start, end), end NULL = open (running on-demand work)")
    parent = models.ForeignKey("self", on_delete=models.PROTECT, null=True, blank=True, related_name="children")
    spot = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=now, editable=False)

    class Meta:
        indexes = [
            models.Index(fields=["host"], name="sched_alloc_host"),
            models.Index(fields=["gpu"], name="sched_alloc_gpu"),
            models.Index(fields=["project", "resource_class"], name="sched_alloc_proj_class"),
            models.Index(fields=["parent"], name="sched_alloc_parent"),
            # the packing policy's live target workload: the latest rows of one fractional form
            # (`placement.weighers.live_workload`), read on every share / MIG / vGPU placement
            models.Index(fields=["resource_class", "-created_at"], name="sched_alloc_class_created"),
        ]
        constraints = [
            ExclusionConstraint(
                name="sched_alloc_no_overlap_holders",
                expressions=[("gpu", RangeOperators.EQUAL), ("slices", RangeOperators.OVERLAPS),
                             ("period", RangeOperators.OVERLAPS)],
                condition=Q(parent__isnull=True, spot=False, slices__isnull=False),
            ),
            ExclusionConstraint(
                name="sched_alloc_no_overlap_workloads",
                expressions=[("gpu", RangeOperators.EQUAL), ("slices", RangeOperators.OVERLAPS),
                             ("period", RangeOperators.OVERLAPS)],
                condition=Q(slices__isnull=False) & ~Q(consumer_type=ConsumerType.LEASE),
            ),
            models.CheckConstraint(
                name="sched_alloc_period_valid",
                condition=Q(period__isempty=False, period__lower_inf=False),
            ),
            models.CheckConstraint(
                name="sched_alloc_slices_shape",
                condition=(Q(resource_class__in=sorted(SLICE_CLASSES), gpu__isnull=False, slices__isnull=False,
                             slices__contained_by=NumericRange(0, GPU_SLICES), slices__isempty=False)
                           | (~Q(resource_class__in=sorted(SLICE_CLASSES)) & Q(slices__isnull=True))),
            ),
            models.CheckConstraint(
                name="sched_alloc_gpu_countable_has_gpu",
                condition=~Q(resource_class__in=sorted(GPU_COUNTABLE_CLASSES)) | Q(gpu__isnull=False),
            ),
            models.CheckConstraint(name="sched_alloc_amount_positive", condition=Q(amount__gte=1)),
            models.CheckConstraint(
                name="sched_alloc_lease_not_spot_not_nested",
                condition=~Q(consumer_type=ConsumerType.LEASE) | Q(spot=False, parent__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.consumer_type}:{self.consumer_id} {self.resource_class} on {self.host_id}"


class HostUsage(models.Model):
    """Per-host ledger row: the lock every claim takes (in host id order) and a usage summary.

    The summary counts *live* allocations (end open or in the future) and is recomputed from the ledger under
    the lock by every claim and release, so it is exact after each write; placement uses it only to pre-rank
    hosts for on-demand requests and re-checks chosen hosts against the ledger itself.
    """

    host = models.OneToOneField("inventory.Host", on_delete=models.CASCADE, primary_key=True, related_name="+")
    gpu_model = models.CharField(max_length=32, blank=True, help_text="catalog key of the host's GPUs")
    gpus_exclusive = models.PositiveSmallIntegerField(default=0, help_text="healthy GPUs in exclusive mode")
    gpus_busy = models.PositiveSmallIntegerField(default=0, help_text="GPUs with any live allocation")
    gpus_free = models.GeneratedField(expression=F("gpus_exclusive") - F("gpus_busy"),
                                      output_field=models.SmallIntegerField(), db_persist=True)
    vcpus_used = models.PositiveIntegerField(default=0)
    memory_used_mib = models.PositiveBigIntegerField(default=0)
    projects = ArrayField(models.UUIDField(), default=list, blank=True,
                          help_text="projects with live allocations on the host")
    dedicated_project = models.ForeignKey("tenancy.Project", on_delete=models.SET_NULL, null=True, blank=True,
                                          related_name="+", help_text="set while a tenant-dedicated claim holds it")
    updated_at = models.DateTimeField(default=now)

    class Meta:
        indexes = [
            models.Index(fields=["gpu_model", "gpus_free", "host"], name="sched_usage_model_free"),
            models.Index(fields=["gpus_free", "host"], name="sched_usage_free"),
        ]
