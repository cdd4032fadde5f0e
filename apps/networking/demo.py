"""Demo networking for `manage.py demo_load` (idempotent): a P_Key pool on the sample fleet's `ib-compute`
fabric, a public IP pool in TEST-NET-3 (RFC 5737, documentation addresses), and for the demo project a VPC
`demo` (10.0.0.0/16) with subnet 10.0.1.0/24 and an InfiniBand partition `demo-train`."""
from __future__ import annotations

from apps.inventory.models import Fabric
from apps.inventory.states import FabricKind
from apps.tenancy.models import Project

from . import services
from .models import IbPartition, PkeyPool, PublicIpPool, Vpc


def load_demo(stdout) -> None:
    fabric = Fabric.objects.filter(name="ib-compute", kind=FabricKind.INFINIBAND).first()
    if fabric is not None and not PkeyPool.objects.filter(fabric=fabric).exists():
        services.pkey_pool_set(actor=None, fabric=fabric, first_pkey=0x0100, last_pkey=0x01FF)
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
    stdout.write("networking: P_Key pool 0x0100-0x01ff on ib-compute, public IP pool 'public', "
                 "demo VPC 10.0.0.0/16 and partition demo-train\n")
