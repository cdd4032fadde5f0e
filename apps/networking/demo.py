"""Demo networking for `manage.py demo_load` (idempotent): a P_Key pool on the sample fleet's `ib-compute`
fabric, a virtual GUID pool on every `ib-compute` HCA port of a hypervisor host (so a VM that shares an HGX
node, e.g. flavor `h100-1x`, can join a partition with an SR-IOV VF: docs/compute.md, "Tenant networks"), a
public IP pool in TEST-NET-3 (RFC 5737, documentation addresses), and for the demo project a VPC `demo`
(10.0.0.0/16) with subnet 10.0.1.0/24 and an InfiniBand partition `demo-train`.

The sample fleet's zone B hosts (H200, H100 in MIG mode, L40S) have no HCA ports by design (Ethernet only), so a
MIG or vGPU VM cannot join a partition there: its create and launch check answer 422 `unplaceable`, reason
`ib_partition`, "no HCA port on fabric ib-compute"."""
from __future__ import annotations

from apps.inventory.models import Fabric, HcaPort
from apps.inventory.states import FabricKind, ProvisioningKind
from apps.tenancy.models import Project

from . import pkeys, services
from .models import IbPartition, PkeyPool, PublicIpPool, VirtualGuidPool, Vpc

#: Demo virtual GUIDs: ``0x946dae13`` then 28 bits of the port's physical GUID times 16, so each port's range
#: (its `max_vfs`, 16 on the sample fleet's HGX nodes) is its own and none is a physical GUID (``0x946dae03...``).
DEMO_VGUID_BASE = 0x946DAE13 << 32
DEMO_VGUID_SIZE = 16


def _virtual_guid_pools(fabric: Fabric) -> int:
    """A pool of `max_vfs` (default 16) virtual GUIDs on each of the fabric's HCA ports of hypervisor hosts that
    has none. Returns how many it created."""
    ports = (HcaPort.objects.filter(fabric=fabric, host__provisioning_kind=ProvisioningKind.HYPERVISOR,
                                    virtual_guid_pool__isnull=True).order_by("port_guid"))
    made = 0
    for port in ports:
        size = port.max_vfs or DEMO_VGUID_SIZE
        first = DEMO_VGUID_BASE + (pkeys.parse_guid(port.port_guid) & 0x0FFFFFFF) * DEMO_VGUID_SIZE
        services.virtual_guid_pool_set(actor=None, hca_port=port, first_guid=pkeys.format_guid(first),
                                       size=min(size, DEMO_VGUID_SIZE))
        made += 1
    return made


def load_demo(stdout) -> None:
    fabric = Fabric.objects.filter(name="ib-compute", kind=FabricKind.INFINIBAND).first()
    if fabric is not None and not PkeyPool.objects.filter(fabric=fabric).exists():
        services.pkey_pool_set(actor=None, fabric=fabric, first_pkey=0x0100, last_pkey=0x01FF)
    pools = _virtual_guid_pools(fabric) if fabric is not None else 0
    if not PublicIpPool.objects.filter(name="public").exists():
        services.public_ip_pool_create(actor=None, name="public", cidr="203.0.113.0/24", first_ip="203.0.113.10",
                                       last_ip="203.0.113.250", gateway_ip="203.0.113.1")
    project = Project.objects.filter(organization__slug="demo", slug="demo").first()
    if project is None:
        stdout.write("networking: no demo project, skipped tenant networks\n")
        return
    if not Vpc.objects.filter(project=project, name="demo").exists():
        vpc = services.vpc_create(actor=None, project=project, name="demo", cidr="10.0.0.0/16")
        services.subnet_create(actor=None, vpc=vpc, name="default", cidr="10.0.1.0/24",
                               dns_nameservers=["10.0.0.2"])
    if fabric is not None and not IbPartition.objects.filter(project=project, name="demo-train").exists():
        services.ib_partition_create(actor=None, project=project, fabric=fabric, name="demo-train")
    total = VirtualGuidPool.objects.filter(hca_port__fabric=fabric).count() if fabric is not None else 0
    stdout.write(f"networking: P_Key pool 0x0100-0x01ff on ib-compute, {total} virtual GUID pools on its HCA "
                 f"ports ({pools} new), public IP pool 'public', demo VPC 10.0.0.0/16 and partition demo-train\n")
