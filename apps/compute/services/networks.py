"""Attach instances to tenant networks: a port in a subnet (OVN) and InfiniBand partition membership.

The tenant names the networks at create (`subnet_id`, `security_group_ids`, `ib_partition_id`);
`network_request_resolve` checks them before anything is written and the ids are stored in `Instance.network`.
The create workflow's `attach_networks` step (after the claim, when the host is known) calls networking's
services, keyed by the instance id so a retried step finds what the last try made:

- `port_create_for_instance`: one port with a fixed IP from the subnet's IPAM and the security groups (default:
  the VPC's default group); the domain gets a virtio NIC with the port's MAC on the host's OVS bridge.
- Bare metal: the host's physical NIC joins the subnet (`port_create_for_baremetal`: its own MAC, on its Ethernet
  fabric's physical network, reached through the subnet's localnet port with the subnet's VLAN id; ADR 1212).
- InfiniBand: an instance that takes a whole host (a `gpu` flavor with every GPU of the host, e.g. an
  8-GPU HGX node) joins with the host's physical HCA port GUIDs as full members (`ib_partition_join_whole_host`);
  a VM that shares its host gets one SR-IOV VF virtual GUID per HCA port of its GPUs' rails
  (`ib_partition_join_vf`). On HGX hosts GPU *i* and HCA port *i* share PCIe switch and rail *i* (NVIDIA DGX
  H100 user guide, "Network Ports"), so the rail of a GPU is its index; ports with a free virtual GUID on the
  GPU's NUMA node are the fallback, then any of the host's on the fabric.

Placement only offers hosts that can do this (docs/adr/0406-infiniband-partitions-in-placement.md): an instance
that asks for a partition carries the need ``ib_partition`` (`placement_needs`), judged by
`ib_partition_host_filter` (registered with scheduling from `apps.compute.integrations`): a host with an HCA port
on the partition's fabric (whole host), with a free virtual GUID in such a port's pool and a free SR-IOV VF of
that port in inventory (shared host: the VF is passed through with the GUID set, `devices._hca_vfs`). A create
no host can serve is refused before anything is written (422 `unplaceable` / 409 `capacity_unavailable`,
reason ``ib_partition``); the attach step's 409 `ib_vf_unavailable` is left for a GUID a concurrent create took
in between (the create then fails rather than boot a VM outside the partition it asked for).

`instance_networks_detach` (delete, and a create that failed) removes the ports and memberships; idempotent.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

from django.db.models import Count

from apps.core.errors import Conflict, ValidationFailed
from apps.core.references import reference_not_found
from apps.inventory.models import Gpu, HcaPort
from apps.scheduling.placement import HostFilterResult, HostNeed, PlacementRequest

from ..drivers.base import NetInterface
from ..states import GpuForm, ProvisioningKind

INVALID_SECURITY_GROUP = "invalid_security_group"
IB_VF_UNAVAILABLE = "ib_vf_unavailable"
NO_TENANT_NIC = "no_tenant_nic"
#: The placement need (and explanation filter) of an instance that joins an InfiniBand partition.
IB_PARTITION_FILTER = "ib_partition"


def _uuid(value) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def network_request_resolve(*, project, subnet_id=None, security_group_ids: Sequence | None = None,
                            ib_partition_id=None) -> dict:
    """Check the requested networks of an instance in `project`; returns what `Instance.network` stores:
    ``{"subnet": str, "security_groups": [str], "ib_partition": str}`` (keys only when asked).

    400 `validation_error` "Not found." naming `subnet_id`, `security_group_ids` or `ib_partition_id` (also another
    project's, ADR 0010); 400 `invalid_security_group` for groups without a subnet or
    from another VPC than the subnet's."""
    from apps.networking.models import IbPartition, SecurityGroup, Subnet

    out: dict = {}
    if subnet_id is not None:
        sid = _uuid(subnet_id)
        subnet = Subnet.objects.filter(pk=sid, project=project).first() if sid else None
        if subnet is None:
            raise reference_not_found("subnet_id")
        out["subnet"] = str(subnet.pk)
    if security_group_ids:
        if "subnet" not in out:
            raise ValidationFailed("Security groups need a subnet.", code=INVALID_SECURITY_GROUP,
                                   errors={"security_group_ids": ["give subnet_id too"]})
        ids = {_uuid(g) for g in security_group_ids}
        groups = list(SecurityGroup.objects.filter(project=project, pk__in=[g for g in ids if g]))
        if None in ids or len(groups) != len(ids):
            raise reference_not_found("security_group_ids")
        if any(g.vpc_id != subnet.vpc_id for g in groups):
            raise ValidationFailed("Security groups must belong to the subnet's VPC.", code=INVALID_SECURITY_GROUP,
                                   errors={"security_group_ids": ["not in the subnet's VPC"]})
        out["security_groups"] = sorted(str(g.pk) for g in groups)
    if ib_partition_id is not None:
        pid = _uuid(ib_partition_id)
        part = IbPartition.objects.filter(pk=pid, project=project).first() if pid else None
        if part is None:
            raise reference_not_found("ib_partition_id")
        out["ib_partition"] = str(part.pk)
    return out


def _whole_host(whole_gpus: int, host_gpus: int) -> bool:
    """`whole_gpus` whole GPUs (0 for another form) take every GPU of a host with `host_gpus`."""
    return whole_gpus > 0 and whole_gpus >= host_gpus > 0


def takes_whole_host(instance) -> bool:
    """True when the flavor takes every GPU of the instance's host (the instance is alone on it)."""
    flavor = instance.flavor
    whole = flavor.gpu_count if flavor.gpu_form == GpuForm.GPU else 0
    return _whole_host(whole, Gpu.objects.filter(host_id=instance.host_id).count())


def placement_needs(network: dict | None) -> tuple[HostNeed, ...]:
    """The placement needs of an instance's networks (`Instance.network`, as `network_request_resolve` returns
    it): ``ib_partition`` when it joins a partition, else none."""
    partition = (network or {}).get("ib_partition")
    return (HostNeed(IB_PARTITION_FILTER, str(partition)),) if partition else ()


def ib_partition_host_filter(*, need: HostNeed, request: PlacementRequest, host_ids: list,
                             ideal: bool) -> HostFilterResult:
    """Scheduling's host filter ``ib_partition`` (`apps.scheduling.placement.register_host_filter`): keep the
    hosts that can give an instance of `request` a GUID in partition ``need.key``, as `instance_networks_attach`
    then does. A request that takes every GPU of the host joins with the host's physical port GUIDs: it needs an
    HCA port on the partition's fabric. Any other (a MIG slice, a vGPU, some of the host's GPUs, CPU only) joins
    with a VF's virtual GUID: it needs such a port whose virtual GUID pool has a free GUID. `ideal` (could the
    fleet ever): only the cabling counts (a pool is the operator's to add, a GUID frees when its instance goes).
    Reasons name the fabric; the note names the partition. Reads only."""
    from apps.networking.models import IbPartition
    from apps.networking.selectors import hca_ports_guid_room

    partition = IbPartition.objects.select_related("fabric").filter(pk=need.key).first()
    if partition is None:
        return HostFilterResult({h: "the InfiniBand partition no longer exists" for h in host_ids})
    fabric = partition.fabric.name
    room: dict = {}
    vfs: dict = {}
    for port in hca_ports_guid_room(fabric_id=partition.fabric_id, host_ids=host_ids):
        room.setdefault(port.host_id, []).append(port.guid_free)
        if port.guid_free:
            vfs[port.host_id] = vfs.get(port.host_id, 0) + max(port.vf_free, 0)
    whole: set = set()
    if request.gpu_form == "gpu":
        whole = {row["host_id"] for row in Gpu.objects.filter(host_id__in=host_ids).values("host_id")
                 .annotate(n=Count("id")) if _whole_host(request.gpus_per_host, row["n"])}
    removed = {}
    for host_id in host_ids:
        free = room.get(host_id)
        if not free:
            removed[host_id] = f"no HCA port on fabric {fabric}"
        elif ideal or host_id in whole:
            continue
        elif all(n is None for n in free):
            removed[host_id] = f"no virtual GUID pool on its HCA ports on fabric {fabric}"
        elif not any(n for n in free if n is not None):
            removed[host_id] = f"no free virtual GUID in its HCA ports' pools on fabric {fabric}"
        elif not vfs.get(host_id):
            removed[host_id] = f"no free SR-IOV VF on its HCA ports on fabric {fabric}"
    return HostFilterResult(removed, note=(
        f"partition {partition.name} on fabric {fabric}: a VM that shares its host joins with an SR-IOV VF's "
        "virtual GUID from its HCA port's pool and gets that VF passed through, one that takes the whole host "
        "with its physical port GUIDs"))


def _instance_gpus(instance) -> list[Gpu]:
    ids = {r["gpu_id"] for r in (instance.devices or {}).get("placement", {}).get("resources", [])
           if r.get("gpu_id")}
    return list(Gpu.objects.filter(pk__in=ids).order_by("index"))


def _vf_ports(instance, partition) -> list[HcaPort]:
    """HCA ports (on the partition's fabric, with a free GUID in their virtual GUID pool and a free SR-IOV VF:
    what `ib_partition_host_filter` placed the instance by) of the instance's GPUs' rails; else those on the GPUs'
    NUMA nodes; else all of the host's (a VM without GPUs: the first). 409 `ib_vf_unavailable` when the host has
    none (a concurrent create took the last GUID after placement)."""
    from apps.networking.selectors import hca_ports_guid_room

    ports = [p for p in hca_ports_guid_room(fabric_id=partition.fabric_id, host_ids=[instance.host_id])
             if p.guid_free and p.vf_free > 0]
    gpus = _instance_gpus(instance)
    rails, numa = {g.index for g in gpus}, {g.numa_node for g in gpus}
    for chosen in ([p for p in ports if p.rail in rails], [p for p in ports if p.numa_node in numa],
                   ports if gpus else ports[:1]):
        if chosen:
            return chosen
    raise Conflict(f"Host {instance.host.name} has no HCA port with a free virtual GUID and VF on fabric "
                   f"{partition.fabric.name}.", code=IB_VF_UNAVAILABLE)


def instance_networks_attach(*, actor, instance) -> None:
    """Create the instance's port and partition memberships (idempotent: skipped when they exist).
    Errors are networking's (409 `subnet_exhausted`, `pkey_limit_per_port`, `guid_pool_exhausted`,
    400 `wrong_fabric`) and 409 `ib_vf_unavailable`; the create fails with that code."""
    from apps.networking.models import IbPartition, IbPartitionMember, Port, SecurityGroup, Subnet
    from apps.networking.services import (
        ib_partition_join_vf,
        ib_partition_join_whole_host,
        port_create_for_instance,
    )

    net = instance.network or {}
    if net.get("subnet") and not Port.objects.filter(instance_id=instance.pk).exists() \
            and instance.flavor.kind == ProvisioningKind.BAREMETAL:
        _baremetal_port(actor, instance, Subnet.objects.get(pk=net["subnet"]))
    elif net.get("subnet") and not Port.objects.filter(instance_id=instance.pk).exists():
        subnet = Subnet.objects.get(pk=net["subnet"])
        groups = list(SecurityGroup.objects.filter(pk__in=net["security_groups"])) \
            if net.get("security_groups") else None
        port_create_for_instance(actor=actor, subnet=subnet, instance_id=instance.pk,
                                 name=f"{instance.name}-eth0"[:63], security_groups=groups)
    if net.get("ib_partition") and not IbPartitionMember.objects.filter(instance_id=instance.pk).exists():
        partition = IbPartition.objects.select_related("fabric").get(pk=net["ib_partition"])
        if takes_whole_host(instance):
            ib_partition_join_whole_host(actor=actor, partition=partition, host=instance.host,
                                         instance_id=instance.pk)
        else:
            for port in _vf_ports(instance, partition):
                ib_partition_join_vf(actor=actor, partition=partition, hca_port=port, instance_id=instance.pk)


def _baremetal_port(actor, instance, subnet) -> None:
    """A bare-metal server joins `subnet` with its physical NIC: the host's first NIC (by name) on an Ethernet
    fabric joins as a port with its own MAC on that fabric's physical network (networking's
    `port_create_for_baremetal`, ADR 1212). 409 `no_tenant_nic` when the host has none cabled to a fabric."""
    from apps.inventory.models import Nic
    from apps.networking.services import port_create_for_baremetal

    nic = (Nic.objects.filter(host_id=instance.host_id, fabric__kind="ethernet").select_related("fabric")
           .order_by("name").first())
    if nic is None:
        raise Conflict(f"Host {instance.host.name} has no NIC on an Ethernet fabric.", code=NO_TENANT_NIC)
    port_create_for_baremetal(actor=actor, subnet=subnet, instance_id=instance.pk, mac_address=nic.mac_address,
                              physical_network=nic.fabric.name, name=f"{instance.name}-{nic.name}"[:63])


def instance_networks_detach(*, actor, instance_id: uuid.UUID) -> None:
    """Delete the instance's ports and partition memberships (idempotent; virtual GUIDs are reused only after
    the subnet manager applied a file without them, RW-045)."""
    from apps.networking.services import ib_partition_members_leave_instance, ports_delete_for_instance

    ports_delete_for_instance(actor=actor, instance_id=instance_id)
    ib_partition_members_leave_instance(actor=actor, instance_id=instance_id)


def interfaces_for(instance_id: uuid.UUID, bridge: str = "br-int") -> tuple[NetInterface, ...]:
    """The domain's NICs: one per port bound to the instance, oldest first."""
    from apps.networking.models import Port

    return tuple(NetInterface(mac_address=p.mac_address, port_id=p.pk, iface_id=f"gpc-p-{p.pk.hex}", bridge=bridge)
                 for p in Port.objects.filter(instance_id=instance_id).order_by("created_at"))


def networks_by_instance(instance_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, dict]:
    """For output, in two queries: ``{instance id: {"ports": [...], "ib_partitions": [...]}}``."""
    from apps.networking.models import IbPartitionMember, Port

    ids = list(instance_ids)
    out: dict[uuid.UUID, dict] = {i: {"ports": [], "ib_partitions": []} for i in ids}
    for p in Port.objects.filter(instance_id__in=ids).prefetch_related("fixed_ips", "security_groups") \
            .order_by("created_at"):
        out[p.instance_id]["ports"].append({
            "id": str(p.pk), "subnet": str(p.subnet_id), "mac_address": p.mac_address,
            "fixed_ips": [a.address for a in p.fixed_ips.all()],
            "security_groups": sorted(str(g.pk) for g in p.security_groups.all())})
    parts: dict[tuple, dict] = {}
    for m in IbPartitionMember.objects.filter(instance_id__in=ids).select_related("partition") \
            .order_by("partition_id", "guid"):
        entry = parts.get((m.instance_id, m.partition_id))
        if entry is None:
            entry = parts[(m.instance_id, m.partition_id)] = {
                "id": str(m.partition_id), "pkey": m.partition.pkey, "members": []}
            out[m.instance_id]["ib_partitions"].append(entry)
        entry["members"].append({"guid": m.guid, "membership": m.membership,
                                 "virtual": m.virtual_guid_id is not None})
    return out
