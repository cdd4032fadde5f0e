"""InfiniBand tenancy: P_Key pools per fabric, partitions, members, and per-port virtual GUID pools."""
from django.db import models
from django.db.models import Q

from apps.core.models import ProjectOwned, TimestampedModel

from ..states import Membership, VirtualGuidStatus


class PkeyPool(TimestampedModel):
    """The P_Keys (15-bit) the operator gives tenants on one InfiniBand fabric: `first_pkey`..`last_pkey`,
    inside 0x0001-0x7ffe (0x7fff is the default partition; see `apps.networking.pkeys`)."""

    fabric = models.OneToOneField("inventory.Fabric", on_delete=models.PROTECT, related_name="pkey_pool")
    first_pkey = models.PositiveIntegerField()
    last_pkey = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(first_pkey__gte=1) & Q(last_pkey__lte=0x7FFE)
                                   & Q(first_pkey__lte=models.F("last_pkey")), name="networking_pkeypool_bounds"),
        ]


class IbPartition(ProjectOwned):
    """A project's partition on one fabric. `pkey` is the 15-bit key, unique per fabric (RW-046).

    `mtu` (bytes) and `rate_gbps` apply to the IPoIB broadcast group; `sl` is its service level (0-15);
    `index0` asks the SM to put the key at P_Key table index 0."""

    fabric = models.ForeignKey("inventory.Fabric", on_delete=models.PROTECT, related_name="ib_partitions")
    name = models.SlugField(max_length=63)
    pkey = models.PositiveIntegerField()
    ipoib = models.BooleanField(default=True)
    mtu = models.PositiveIntegerField(null=True, blank=True, help_text="IPoIB broadcast group MTU in bytes")
    rate_gbps = models.PositiveIntegerField(null=True, blank=True)
    sl = models.PositiveSmallIntegerField(null=True, blank=True)
    index0 = models.BooleanField(default=False)

    class Meta:
        ordering = ["fabric", "pkey"]
        constraints = [
            models.UniqueConstraint(fields=["fabric", "pkey"], name="networking_ibp_fabric_pkey_uniq"),
            models.UniqueConstraint(fields=["project", "name"], name="networking_ibp_name_uniq"),
            models.CheckConstraint(condition=Q(pkey__gte=1) & Q(pkey__lte=0x7FFE), name="networking_ibp_pkey_range"),
            models.CheckConstraint(condition=Q(sl__isnull=True) | Q(sl__lte=15), name="networking_ibp_sl_range"),
        ]


class VirtualGuidPool(TimestampedModel):
    """Virtual port GUIDs for the SR-IOV VFs of one HCA port: `first_guid` .. `first_guid + size - 1`."""

    hca_port = models.OneToOneField("inventory.HcaPort", on_delete=models.PROTECT, related_name="virtual_guid_pool")
    first_guid = models.CharField(max_length=18, help_text="0x-prefixed 64-bit GUID")
    size = models.PositiveIntegerField()

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(size__gte=1), name="networking_vgpool_size")]


class VirtualGuid(TimestampedModel):
    """A GUID taken from a pool. `releasing` rows are not reused until a reconcile of the fabric applied a
    partitions file without them (RW-045)."""

    pool = models.ForeignKey(VirtualGuidPool, on_delete=models.PROTECT, related_name="guids")
    offset = models.PositiveIntegerField()
    guid = models.CharField(max_length=18, unique=True)
    instance_id = models.UUIDField(null=True, blank=True, db_index=True)
    status = models.CharField(max_length=16, choices=VirtualGuidStatus.choices, default=VirtualGuidStatus.ALLOCATED)
    released_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["pool", "offset"]
        constraints = [models.UniqueConstraint(fields=["pool", "offset"], name="networking_vguid_offset_uniq")]


class IbPartitionMember(ProjectOwned):
    """A port GUID in a partition: a physical HCA port (whole-host instances, bare metal) or a VF's virtual
    GUID (VMs sharing a host). Membership full or limited.

    `added_via_api`: added by `POST /ib-partitions/{id}/members` or `/service-ports` (removable with `DELETE
    /ib-partitions/{id}/members/{guid}`), not by compute for an instance's network (that one leaves with the
    instance)."""

    partition = models.ForeignKey(IbPartition, on_delete=models.CASCADE, related_name="members")
    guid = models.CharField(max_length=18, help_text="0x-prefixed 64-bit port GUID")
    membership = models.CharField(max_length=8, choices=Membership.choices, default=Membership.FULL)
    hca_port = models.ForeignKey("inventory.HcaPort", on_delete=models.PROTECT, null=True, blank=True,
                                 related_name="partition_memberships")
    virtual_guid = models.ForeignKey(VirtualGuid, on_delete=models.PROTECT, null=True, blank=True,
                                     related_name="memberships")
    instance_id = models.UUIDField(null=True, blank=True, db_index=True)
    added_via_api = models.BooleanField(default=False)

    class Meta:
        ordering = ["partition", "guid"]
        constraints = [
            models.UniqueConstraint(fields=["partition", "guid"], name="networking_ibm_partition_guid_uniq"),
            models.CheckConstraint(condition=Q(hca_port__isnull=True) | Q(virtual_guid__isnull=True),
                                   name="networking_ibm_one_source"),
        ]


class FabricSyncState(TimestampedModel):
    """What the last reconcile of one backend did: `key` is `ovn` or `ib:<fabric name>`."""

    key = models.CharField(max_length=100, unique=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_ok_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    applied_digest = models.CharField(max_length=64, blank=True, help_text="sha256 of the applied desired state")
    last_result = models.JSONField(default=dict, blank=True)


class FabricDriftEvent(TimestampedModel):
    """One time a reconcile found a backend not as we left it (`key` as in `FabricSyncState`). For an OpenSM
    fabric `reason` is ``missing`` | ``unreadable`` | ``invalid`` | ``modified`` (the partitions file);
    `restored`: the last good state was put back in the same run. Kept for the record (never updated)."""

    key = models.CharField(max_length=100, db_index=True)
    fabric = models.ForeignKey("inventory.Fabric", on_delete=models.CASCADE, null=True, blank=True,
                               related_name="drift_events")
    reason = models.CharField(max_length=32)
    restored = models.BooleanField(default=False)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
