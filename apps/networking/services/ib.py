"""InfiniBand: P_Key pools (operator), partitions (tenants), members (compute), virtual GUID pools.

Compute integrates through three functions: `ib_partition_join_whole_host` (an instance that takes a whole host
or bare-metal node: its physical HCA port GUIDs join), `ib_partition_join_vf` (a VM that shares its host: a
virtual GUID from the HCA port's pool joins) and `ib_partition_members_leave_instance` (on delete). Every change
schedules a reconcile of the partition's fabric after commit (`tasks.ib_fabric_reconcile_task`).
"""
from __future__ import annotations

import uuid

from django.conf import settings
from django.db import transaction

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.db import advisory_xact_lock, unique_conflict
from apps.core.errors import Conflict, NotFound, ValidationFailed
from apps.core.references import reference_not_found
from apps.inventory.models import Fabric, HcaPort, Host
from apps.inventory.states import FabricKind
from apps.tenancy import selectors as tenancy_selectors
from apps.tenancy.quotas import quota_check

from .. import pkeys
from ..errors import Code
from ..models import IbPartition, IbPartitionMember, PkeyPool, VirtualGuid, VirtualGuidPool
from ..states import IB_MTU_CODES, IB_RATE_CODES, Membership, VirtualGuidStatus
from ._common import (
    NETWORK_STAFF,
    authorize_operator,
    authorize_partition_members,
    authorize_write,
    fields_of,
    input_errors,
    schedule_ib_reconcile,
)

PARTITION_FIELDS = ("name", "pkey", "ipoib", "mtu", "rate_gbps", "sl", "index0")
DEFAULT_MAX_PKEYS_PER_PORT = 128   # RW-043: a host port holds at most 128 P_Keys (kernel limit; configurable)


def _require_ib(fabric: Fabric) -> None:
    if fabric.kind != FabricKind.INFINIBAND:
        raise ValidationFailed(f"Fabric {fabric.name!r} is not InfiniBand.", code=Code.NOT_INFINIBAND,
                               errors={"fabric": ["not an InfiniBand fabric"]})


def pkey_pool_set(*, actor, fabric: Fabric, first_pkey: int | str, last_pkey: int | str) -> PkeyPool:
    """Operator: the fabric's tenant P_Keys are `first_pkey`..`last_pkey` (inside 0x0001-0x7ffe, 400
    `invalid_pkey_pool` otherwise). 409 `in_use` when an existing partition would fall outside."""
    authorize_operator(actor)
    _require_ib(fabric)
    with input_errors():
        first = pkeys.parse_pkey(first_pkey) if not isinstance(first_pkey, int) else first_pkey
        last = pkeys.parse_pkey(last_pkey) if not isinstance(last_pkey, int) else last_pkey
        pkeys.check_pool_bounds(first, last)
    with transaction.atomic():
        outside = IbPartition.objects.filter(fabric=fabric).exclude(pkey__gte=first, pkey__lte=last)
        if outside.exists():
            raise Conflict("Partitions hold keys outside the new pool.", code=Code.IN_USE)
        pool, _ = PkeyPool.objects.update_or_create(fabric=fabric,
                                                    defaults={"first_pkey": first, "last_pkey": last})
        audit_record(actor=actor, action="networking.pkey_pool.set", target=pool,
                     after={"fabric": fabric.name, "first_pkey": first, "last_pkey": last})
    return pool


def _check_qos(mtu, rate_gbps, sl) -> None:
    errors = {}
    if mtu is not None and mtu not in IB_MTU_CODES:
        errors["mtu"] = [f"one of {sorted(IB_MTU_CODES)}"]
    if rate_gbps is not None and rate_gbps not in IB_RATE_CODES:
        errors["rate_gbps"] = [f"one of {sorted(IB_RATE_CODES)}"]
    if sl is not None and not 0 <= sl <= 15:
        errors["sl"] = ["0-15"]
    if errors:
        raise ValidationFailed("Invalid partition QoS.", code="invalid_qos", errors=errors)


def _choose_pkey(pool: PkeyPool, requested) -> int:
    used = set(IbPartition.objects.filter(fabric_id=pool.fabric_id).values_list("pkey", flat=True))
    if requested is not None:
        with input_errors():
            key = pkeys.parse_pkey(requested)
        if not pool.first_pkey <= key <= pool.last_pkey:
            raise ValidationFailed(
                f"P_Key {pkeys.format_pkey(key)} is outside this fabric's pool "
                f"{pkeys.format_pkey(pool.first_pkey)}-{pkeys.format_pkey(pool.last_pkey)}.",
                code=Code.PKEY_OUT_OF_POOL, errors={"pkey": ["outside the operator's pool"]})
        if key in used:
            raise Conflict(f"P_Key {pkeys.format_pkey(key)} is in use on this fabric (0x{key | 0x8000:04x} and "
                           f"{pkeys.format_pkey(key)} are the same partition).", code=Code.PKEY_IN_USE)
        return key
    key = next((k for k in range(pool.first_pkey, pool.last_pkey + 1) if k not in used), None)
    if key is None:
        raise Conflict("No free P_Key is left in this fabric's pool.", code=Code.PKEY_POOL_EXHAUSTED)
    return key


def ib_partition_create(*, actor, project, fabric: Fabric, name: str, pkey: int | str | None = None,
                        ipoib: bool = True, mtu: int | None = None, rate_gbps: int | None = None,
                        sl: int | None = None, index0: bool = False) -> IbPartition:
    """A partition of `project` on `fabric` with a P_Key from the fabric's pool (lowest free, or `pkey`).

    `pkey` may carry the membership bit (0x8123 is stored as 0x0123). 400 `invalid_pkey` (0x0000), `pkey_reserved`
    (0x7fff, 0xffff), `pkey_out_of_pool`; 409 `pkey_in_use`, `pkey_pool_exhausted`, `no_pkey_pool`; 422 past the
    `ib_partitions` quota. Keys are unique per fabric, not globally (RW-046)."""
    authorize_write(actor, project)
    _require_ib(fabric)
    _check_qos(mtu, rate_gbps, sl)
    with transaction.atomic():
        quota_check(scope=project, resource="ib_partitions", requested=1)
        pool = PkeyPool.objects.select_for_update().filter(fabric=fabric).first()
        if pool is None:
            raise Conflict(f"Fabric {fabric.name!r} has no P_Key pool.", code=Code.NO_PKEY_POOL)
        key = _choose_pkey(pool, pkey)
        with unique_conflict(f"A partition named {name!r} exists in this project.", code=Code.NAME_TAKEN):
            part = IbPartition.objects.create(project=project, fabric=fabric, name=name, pkey=key, ipoib=ipoib,
                                              mtu=mtu, rate_gbps=rate_gbps, sl=sl, index0=index0)
        audit_record(actor=actor, action="networking.ib_partition.create", target=part,
                     after=fields_of(part, PARTITION_FIELDS))
        schedule_ib_reconcile(fabric.pk)
    return part


def ib_partition_delete(*, actor, partition: IbPartition) -> None:
    """Delete a partition without members (409 `in_use`); its key returns to the pool."""
    authorize_write(actor, partition.project)
    with transaction.atomic():
        if partition.members.exists():
            raise Conflict("The partition still has members.", code=Code.IN_USE)
        audit_record(actor=actor, action="networking.ib_partition.delete", target=partition,
                     before=fields_of(partition, PARTITION_FIELDS))
        fabric_id = partition.fabric_id
        partition.delete()
        schedule_ib_reconcile(fabric_id)


def virtual_guid_pool_set(*, actor, hca_port: HcaPort, first_guid: str, size: int) -> VirtualGuidPool:
    """Operator: virtual GUIDs `first_guid`..`first_guid + size - 1` for the VFs of `hca_port`. 400
    `guid_pool_overlap` when the range overlaps another port's pool or holds a physical port GUID."""
    authorize_operator(actor)
    try:
        first = pkeys.parse_guid(first_guid)
    except ValueError as exc:
        raise ValidationFailed(str(exc), code="invalid_guid", errors={"first_guid": [str(exc)]})
    if size < 1 or first + size > 2**64:
        raise ValidationFailed("size must be >= 1 and the range must fit in 64 bits.", code="invalid_guid",
                               errors={"size": ["out of range"]})
    last = first + size - 1
    with transaction.atomic():
        for other in VirtualGuidPool.objects.exclude(hca_port=hca_port):
            o_first = pkeys.parse_guid(other.first_guid)
            if first <= o_first + other.size - 1 and o_first <= last:
                raise ValidationFailed("The range overlaps another port's pool.", code=Code.GUID_POOL_OVERLAP,
                                       errors={"first_guid": ["overlaps another pool"]})
        if any(first <= pkeys.parse_guid(g) <= last for g in HcaPort.objects.values_list("port_guid", flat=True)):
            raise ValidationFailed("The range holds a physical port GUID.", code=Code.GUID_POOL_OVERLAP,
                                   errors={"first_guid": ["holds a physical port GUID"]})
        pool, _ = VirtualGuidPool.objects.update_or_create(
            hca_port=hca_port, defaults={"first_guid": pkeys.format_guid(first), "size": size})
        audit_record(actor=actor, action="networking.virtual_guid_pool.set", target=pool,
                     after={"hca_port": str(hca_port.pk),
                                                           "first_guid": pool.first_guid, "size": size})
    return pool


def virtual_guid_allocate(*, hca_port: HcaPort, instance_id: uuid.UUID | None) -> VirtualGuid:
    """The lowest free GUID of the port's pool (RW-045: always inside the range, unique; GUIDs still
    `releasing` are not reused). 409 `guid_pool_exhausted`; 409 `no_guid_pool` for a port without a pool."""
    with transaction.atomic():
        pool = VirtualGuidPool.objects.select_for_update().filter(hca_port=hca_port).first()
        if pool is None:
            raise Conflict("The HCA port has no virtual GUID pool.", code="no_guid_pool")
        used = set(pool.guids.values_list("offset", flat=True))
        offset = next((i for i in range(pool.size) if i not in used), None)
        if offset is None:
            raise Conflict("The port's virtual GUID pool is exhausted.", code=Code.GUID_POOL_EXHAUSTED)
        guid = pkeys.format_guid(pkeys.parse_guid(pool.first_guid) + offset)
        return VirtualGuid.objects.create(pool=pool, offset=offset, guid=guid, instance_id=instance_id)


def _max_per_port() -> int:
    return int(getattr(settings, "NETWORKING_MAX_PKEYS_PER_PORT", DEFAULT_MAX_PKEYS_PER_PORT))


def ib_partition_member_join(*, actor, partition: IbPartition, hca_port: HcaPort | None = None,
                             virtual_guid: VirtualGuid | None = None, instance_id: uuid.UUID | None = None,
                             membership: str = Membership.FULL, added_via_api: bool = False) -> IbPartitionMember:
    """Add a physical port (`hca_port`) or a VF's `virtual_guid` to `partition` (idempotent per GUID).

    400 `wrong_fabric` when the port is cabled to another fabric (RW-046); 409 `guid_in_other_project` when the
    GUID is in another project's partition, unless this is a shared service port (`_shared_port_ok`); 409
    `pkey_limit_per_port` past `NETWORKING_MAX_PKEYS_PER_PORT` partitions per GUID (RW-043)."""
    authorize_partition_members(actor, partition.project)
    if (hca_port is None) == (virtual_guid is None):
        raise ValueError("give exactly one of hca_port, virtual_guid")
    port = hca_port or virtual_guid.pool.hca_port
    if port.fabric_id != partition.fabric_id:
        raise ValidationFailed(f"The HCA port is on fabric {port.fabric.name!r}, the partition on "
                               f"{partition.fabric.name!r}.", code=Code.WRONG_FABRIC,
                               errors={"hca_port": ["not cabled to the partition's fabric"]})
    if membership not in Membership.values:
        raise ValidationFailed("membership must be full or limited.", code="invalid_membership",
                               errors={"membership": ["full | limited"]})
    guid = pkeys.format_guid(hca_port.port_guid if hca_port else virtual_guid.guid)
    with transaction.atomic():
        _guid_lock(guid)
        existing = list(IbPartitionMember.objects.filter(guid=guid).select_related("partition"))
        others = [m for m in existing if m.partition.project_id != partition.project_id]
        if others and not _shared_port_ok(actor, membership, existing):
            raise Conflict(f"GUID {guid} is in another project's partition.", code=Code.GUID_IN_OTHER_PROJECT)
        same = next((m for m in existing if m.partition_id == partition.pk), None)
        if same is not None:
            return same
        if len(existing) >= _max_per_port():
            raise Conflict(f"GUID {guid} is already in {len(existing)} partitions (limit {_max_per_port()}).",
                           code=Code.PKEY_LIMIT_PER_PORT)
        member = IbPartitionMember.objects.create(project=partition.project, partition=partition, guid=guid,
                                                  membership=membership, hca_port=hca_port,
                                                  virtual_guid=virtual_guid, instance_id=instance_id,
                                                  added_via_api=added_via_api)
        audit_record(actor=actor, action="networking.ib_partition.member_join", target=partition,
                     after={"guid": guid, "membership": membership, "instance_id": instance_id})
        schedule_ib_reconcile(partition.fabric_id)
    return member


def _guid_lock(guid: str) -> None:
    """Serialise joins of one GUID (two projects' concurrent joins cannot both pass the checks)."""
    advisory_xact_lock(f"networking:guid:{guid}")


def _shared_port_ok(actor, membership: str, existing) -> bool:
    """A port shared by several projects' partitions (a storage gateway, a service node) is allowed only as a
    limited member everywhere, and only when a staff operator adds it: limited members cannot talk to each
    other, so the tenants stay isolated from each other while each reaches the service. Never a full member of
    two tenants' partitions (that would bridge them)."""
    return (_is_network_operator(actor) and membership == Membership.LIMITED
            and all(m.membership == Membership.LIMITED for m in existing))


def _is_network_operator(actor) -> bool:
    return tenancy_selectors.is_staff(actor) and actor.staff_role in NETWORK_STAFF


def ib_partition_service_port_join(*, actor, partition: IbPartition, hca_port: HcaPort) -> IbPartitionMember:
    """Staff operators: make a shared service port (e.g. a storage gateway) a limited member of `partition`;
    the same port may be a limited member of several projects' partitions. 403 for everyone else; 409
    `guid_in_other_project` when the port is a full member anywhere else; otherwise as
    `ib_partition_member_join`."""
    authorize_operator(actor)
    return ib_partition_member_join(actor=actor, partition=partition, hca_port=hca_port,
                                    membership=Membership.LIMITED, added_via_api=True)


def _member_source(actor, partition: IbPartition, guid: str) -> dict | None:
    """Where GUID `guid` (canonical) may come from for `actor`: a membership of it on the same fabric that the
    partition's project holds for one of its instances (its HCA port or VF: the new membership leaves with that
    instance; a shared service port staff added is not the project's own), else for a network operator any HCA
    port or allocated virtual GUID of the fabric. None: not found for this actor."""
    own = (IbPartitionMember.objects.filter(project_id=partition.project_id, guid=guid, instance_id__isnull=False,
                                            partition__fabric_id=partition.fabric_id)
           .select_related("hca_port", "virtual_guid").order_by("created_at").first())
    if own is not None:
        return {"hca_port": own.hca_port, "virtual_guid": own.virtual_guid, "instance_id": own.instance_id}
    if not _is_network_operator(actor):
        return None
    port = HcaPort.objects.filter(port_guid__iexact=guid, fabric_id=partition.fabric_id).first()
    if port is not None:
        return {"hca_port": port, "virtual_guid": None, "instance_id": None}
    vguid = (VirtualGuid.objects.filter(guid=guid, status=VirtualGuidStatus.ALLOCATED,
                                        pool__hca_port__fabric_id=partition.fabric_id)
             .select_related("pool__hca_port").first())
    if vguid is not None:
        return {"hca_port": None, "virtual_guid": vguid, "instance_id": vguid.instance_id}
    return None


def ib_partition_member_add(*, actor, partition: IbPartition, guid: str,
                            membership: str = Membership.LIMITED) -> IbPartitionMember:
    """Add port GUID `guid` to `partition` as a `membership` (default limited) member, through the API.

    Which GUIDs (the rule of ADR 0704): project members may add only their project's own GUIDs, those already a
    member of one of the project's partitions on the same fabric (an instance's HCA port or VF; the membership
    leaves with that instance). Network operators may also add any HCA port or allocated virtual GUID of the
    fabric; a GUID in several projects' partitions stays a limited member everywhere. Any other GUID, another
    project's included, is 400 "Not found." naming `guid`, like one that does not exist.
    Errors: 400 `invalid_guid` (not `0x` + up to 16 hex digits), `invalid_membership`; 403 viewers; 409
    `already_member` (the GUID is a member with the other membership; remove it first), `guid_in_other_project`
    (a full member next to another project's membership, or a project member extending a shared port),
    `pkey_limit_per_port`. The same GUID with the same membership again returns the member (idempotent)."""
    authorize_partition_members(actor, partition.project)
    if membership not in Membership.values:
        raise ValidationFailed("membership must be full or limited.", code="invalid_membership",
                               errors={"membership": ["full | limited"]})
    try:
        text = pkeys.format_guid(guid)
    except ValueError as exc:
        raise ValidationFailed(str(exc), code=Code.INVALID_GUID, errors={"guid": [str(exc)]})
    with transaction.atomic():
        _guid_lock(text)
        current = IbPartitionMember.objects.filter(partition=partition, guid=text).first()
        if current is not None and current.membership != membership:
            raise Conflict(f"GUID {text} is a {current.membership} member of this partition.",
                           code=Code.ALREADY_MEMBER)
        source = _member_source(actor, partition, text)
        if source is None:
            raise reference_not_found("guid")
        return ib_partition_member_join(actor=actor, partition=partition, membership=membership,
                                        added_via_api=True, **source)


def ib_partition_member_remove(*, actor, partition: IbPartition, guid: str) -> None:
    """Remove a member added through the API (`ib_partition_member_add`, service ports). 404 when `guid` is not
    a member of `partition`; 409 `in_use` for an instance's own membership (it leaves with the instance)."""
    authorize_partition_members(actor, partition.project)
    try:
        text = pkeys.format_guid(guid)
    except ValueError:
        raise NotFound("No such member of this partition.")
    with transaction.atomic():
        member = IbPartitionMember.objects.select_for_update().filter(partition=partition, guid=text).first()
        if member is None:
            raise NotFound("No such member of this partition.")
        if not member.added_via_api:
            raise Conflict("The GUID joined with its instance and leaves when the instance is deleted.",
                           code=Code.IN_USE)
        audit_record(actor=actor, action="networking.ib_partition.member_leave", target=partition,
                     before={"guid": text, "membership": member.membership, "instance_id": member.instance_id})
        member.delete()
        schedule_ib_reconcile(partition.fabric_id)


def ib_partition_join_whole_host(*, actor, partition: IbPartition, host: Host,
                                 instance_id: uuid.UUID) -> list[IbPartitionMember]:
    """For compute: every HCA port of `host` on the partition's fabric joins as a full member (whole-host
    instances and bare metal). 400 `wrong_fabric` when the host has no port on that fabric."""
    ports = list(HcaPort.objects.filter(host=host, fabric_id=partition.fabric_id).select_related("fabric"))
    if not ports:
        raise ValidationFailed(f"Host {host.name} has no HCA port on fabric {partition.fabric.name!r}.",
                               code=Code.WRONG_FABRIC, errors={"host": ["not cabled to the partition's fabric"]})
    with transaction.atomic():
        return [ib_partition_member_join(actor=actor, partition=partition, hca_port=p, instance_id=instance_id)
                for p in ports]


def ib_partition_join_vf(*, actor, partition: IbPartition, hca_port: HcaPort,
                         instance_id: uuid.UUID) -> IbPartitionMember:
    """For compute: a VM that shares its host gets a virtual GUID from `hca_port`'s pool, which joins."""
    if hca_port.fabric_id != partition.fabric_id:
        raise ValidationFailed("The HCA port is not on the partition's fabric.", code=Code.WRONG_FABRIC,
                               errors={"hca_port": ["not cabled to the partition's fabric"]})
    with transaction.atomic():
        vguid = virtual_guid_allocate(hca_port=hca_port, instance_id=instance_id)
        return ib_partition_member_join(actor=actor, partition=partition, virtual_guid=vguid,
                                        instance_id=instance_id)


def ib_partition_members_leave_instance(*, actor, instance_id: uuid.UUID) -> int:
    """For compute: remove every member of `instance_id`; its virtual GUIDs become `releasing` and are freed
    once a reconcile applied a partitions file without them. Returns how many members left (idempotent)."""
    with transaction.atomic():
        members = list(IbPartitionMember.objects.select_for_update().filter(instance_id=instance_id)
                       .select_related("partition__project"))
        for m in members:
            authorize_partition_members(actor, m.partition.project)
        fabrics = {m.partition.fabric_id for m in members}
        for m in members:
            audit_record(actor=actor, action="networking.ib_partition.member_leave", target=m.partition,
                         before={"guid": m.guid, "instance_id": instance_id})
        IbPartitionMember.objects.filter(pk__in=[m.pk for m in members]).delete()
        VirtualGuid.objects.filter(instance_id=instance_id, status=VirtualGuidStatus.ALLOCATED).update(
            status=VirtualGuidStatus.RELEASING, released_at=now())
        for fabric_id in sorted(fabrics, key=str):
            schedule_ib_reconcile(fabric_id)
    return len(members)


def virtual_guids_free_released(*, fabric: Fabric, applied_guids: set[str]) -> int:
    """Reconciler: delete `releasing` GUIDs of `fabric` that the applied partitions no longer hold."""
    qs = VirtualGuid.objects.filter(status=VirtualGuidStatus.RELEASING, pool__hca_port__fabric=fabric)
    doomed = [v.pk for v in qs if v.guid not in applied_guids and not v.memberships.exists()]
    VirtualGuid.objects.filter(pk__in=doomed).delete()
    return len(doomed)
