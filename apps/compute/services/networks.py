"""Attach instances to tenant networks: a port in a subnet (OVN) and InfiniBand partition membership.

The tenant names the networks at create (`subnet_id`, `security_group_ids`, `ib_partition_id`);
`network_request_resolve` checks them before anything is written and the ids are stored in `Instance.network`.
The create workflow's `attach_networks` step (after the claim, when the host is known) calls networking's
services, keyed by the instance id so a retried step finds what the last try made:

- `port_create_for_instance`: one port with a fixed IP from the subnet's IPAM and the security groups (default:
  the VPC's default group); the domain gets a virtio NIC with the port's MAC on the host's OVS bridge.
- InfiniBand: an instance that takes a whole host (a `gpu` flavor with every GPU of the host, e.g. an
  8-GPU HGX node) joins with the host's physical HCA port GUIDs as full members (`ib_partition_join_whole_host`);
  a VM that shares its host gets one SR-IOV VF virtual GUID per HCA port of its GPUs' rails
  (`ib_partition_join_vf`). On HGX hosts GPU *i* and HCA port *i* share PCIe switch and rail *i* (NVIDIA DGX
  H100 user guide, "Network Ports"), so the rail of a GPU is its index; ports with a virtual GUID pool on the
  GPU's NUMA node are the fallback, and a host without any is 409 `ib_vf_unavailable` (the create fails rather
  than boot a VM outside the partition it asked for).

`instance_networks_detach` (delete, and a create that failed) removes the ports and memberships; idempotent.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

from apps.core.errors import Conflict, ValidationFailed
from apps.core.references import reference_not_found
from apps.inventory.models import Gpu, HcaPort

from ..drivers.base import NetInterface
from ..states import GpuForm

INVALID_SECURITY_GROUP = "invalid_security_group"
IB_VF_UNAVAILABLE = "ib_vf_unavailable"


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


def takes_whole_host(instance) -> bool:
    """True when the flavor takes every GPU of the instance's host (the instance is alone on it)."""
    flavor = instance.flavor
    if flavor.gpu_form != GpuForm.GPU:
        return False
    return flavor.gpu_count >= Gpu.objects.filter(host_id=instance.host_id).count() > 0


def _instance_gpus(instance) -> list[Gpu]:
    ids = {r["gpu_id"] for r in (instance.devices or {}).get("placement", {}).get("resources", [])
           if r.get("gpu_id")}
    return list(Gpu.objects.filter(pk__in=ids).order_by("index"))


def _vf_ports(instance, partition) -> list[HcaPort]:
    """HCA ports (with a virtual GUID pool, on the partition's fabric) of the instance's GPUs' rails; else those
    on the GPUs' NUMA nodes; else any of the host's. 409 `ib_vf_unavailable` when the host has none."""
    base = HcaPort.objects.filter(host_id=instance.host_id, fabric_id=partition.fabric_id,
                                  virtual_guid_pool__isnull=False).order_by("device", "port_number")
    gpus = _instance_gpus(instance)
    for qs in (base.filter(rail__in=[g.index for g in gpus]) if gpus else base.none(),
               base.filter(numa_node__in=[g.numa_node for g in gpus]) if gpus else base.none(), base):
        ports = list(qs)
        if ports:
            return ports if gpus else ports[:1]
    raise Conflict(f"Host {instance.host.name} has no HCA port with a virtual GUID pool on the partition's fabric.",
                   code=IB_VF_UNAVAILABLE)


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
    if net.get("subnet") and not Port.objects.filter(instance_id=instance.pk).exists():
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
