"""A tiny fleet builder for scheduling tests (real rows in PostgreSQL, no mocks)."""
from __future__ import annotations

import itertools
import uuid

from apps.inventory.models import (
    Fabric,
    Gpu,
    HcaPort,
    Host,
    Region,
    ScalableUnit,
    Switch,
    VirtualFunction,
    Zone,
)
from apps.tenancy.models import Organization, Project

_seq = itertools.count(1)


def project(slug: str = "p") -> Project:
    org = Organization.objects.get_or_create(slug=f"org-{slug}", defaults={"name": slug})[0]
    return Project.objects.get_or_create(organization=org, slug=slug, defaults={"name": slug})[0]


def zone(name: str = "z1") -> Zone:
    region = Region.objects.get_or_create(name="r1")[0]
    return Zone.objects.get_or_create(region=region, name=name)[0]


def host(*, gpus: int = 8, model: str = "H100-SXM5-80GB", state: str = "available", zone_name: str = "z1",
         mode: str = "exclusive", threads: int = 128, memory_mib: int = 1024 * 1024, su: ScalableUnit | None = None,
         nvswitch: str = "hgx-h100-8gpu", numa_split: int = 4) -> Host:
    n = next(_seq)
    h = Host.objects.create(name=f"h{n}-{uuid.uuid4().hex[:6]}", zone=zone(zone_name), serial=f"S{uuid.uuid4().hex}",
                            state=state, cpu_threads=threads, cpu_cores=threads // 2, memory_mib=memory_mib,
                            numa_nodes=2, nvswitch_system=nvswitch if gpus == 8 else "", scalable_unit=su)
    Gpu.objects.bulk_create([
        Gpu(host=h, index=i, model=model, uuid=f"GPU-{uuid.uuid4()}", serial=f"G{uuid.uuid4().hex}",
            pci_address=f"0000:{i:02x}:00.0", numa_node=0 if i < numa_split else 1, mode=mode)
        for i in range(gpus)])
    return h


def ib_fabric(name: str = "ib0") -> Fabric:
    region = Region.objects.get_or_create(name="r1")[0]
    return Fabric.objects.get_or_create(name=name, defaults={"kind": "infiniband", "region": region})[0]


def su_with_leaves(name: str, *, rails: int = 2, fabric: Fabric | None = None, zone_name: str = "z1"):
    """A scalable unit with one leaf switch per rail. Returns (su, {rail: leaf})."""
    fabric = fabric or ib_fabric()
    su = ScalableUnit.objects.create(zone=zone(zone_name), name=name)
    leaves = {r: Switch.objects.create(name=f"{name}-leaf-r{r}-{uuid.uuid4().hex[:4]}", fabric=fabric,
                                       role="leaf", scalable_unit=su, rail=r) for r in range(rails)}
    return su, leaves


def cable(h: Host, leaves: dict, fabric: Fabric | None = None, vfs: int = 2) -> None:
    """One HCA port per rail, cabled to that rail's leaf (rail r's HCA at PCI 0000:(0x80+r):00.0), with `vfs`
    SR-IOV VFs in inventory (VF n at 0000:(0x80+r):00.(n+1), as the agent reports them)."""
    fabric = fabric or ib_fabric()
    for r, leaf in leaves.items():
        port = HcaPort.objects.create(host=h, device=f"mlx5_{r}",
                                      port_guid=f"0x{uuid.uuid4().int & (2**64 - 1):016x}", fabric=fabric, rail=r,
                                      leaf_switch=leaf, pci_address=f"0000:{0x80 + r:02x}:00.0",
                                      leaf_port=next(_seq) % 60000, max_vfs=vfs)
        VirtualFunction.objects.bulk_create([VirtualFunction(hca_port=port, index=n,
                                                             pci_address=f"0000:{0x80 + r:02x}:00.{n + 1}")
                                             for n in range(vfs)])
