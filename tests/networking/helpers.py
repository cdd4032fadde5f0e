"""Builders for networking tests: real rows through the real services (no mocks)."""
from __future__ import annotations

import itertools
import uuid

from apps.identity.models import StaffRole
from apps.inventory.models import Fabric, HcaPort, Host, Region, Switch, Zone
from apps.networking import services
from apps.tenancy.models import OrgRole, Quota
from tests.tenancy.helpers import client_for, make_org, make_project, make_user, member, token_for

_seq = itertools.count(1)


class Tenant:
    """An organization with one project, a member user and its API client."""

    def __init__(self, slug: str, plan: str = "enterprise"):
        self.org = make_org(slug, plan=plan)
        self.project = make_project(self.org, f"{slug}-main")
        self.user = make_user(f"member@{slug}.test")
        member(self.user, self.org, OrgRole.MEMBER)
        self.viewer = make_user(f"viewer@{slug}.test")
        member(self.viewer, self.org, OrgRole.VIEWER)
        self.client = client_for(token_for(self.user, organization=self.org))

    def quota(self, resource: str, limit: int) -> None:
        Quota.objects.update_or_create(organization=self.org, project=None, resource=resource,
                                       defaults={"limit": limit})


def operator():
    return make_user(f"op{next(_seq)}@provider.test", staff_role=StaffRole.OPERATOR)


def operator_client():
    user = operator()
    return user, client_for(token_for(user, staff=True))


def ib_fabric(name: str = "ib-t", *, pool=(0x0100, 0x01FF)) -> Fabric:
    region = Region.objects.get_or_create(name="r1")[0]
    fabric = Fabric.objects.get_or_create(name=name, defaults={"kind": "infiniband", "region": region})[0]
    if pool:
        services.pkey_pool_set(actor=None, fabric=fabric, first_pkey=pool[0], last_pkey=pool[1])
    return fabric


def host_with_hca(fabric: Fabric, *, ports: int = 1, leaf: Switch | None = None, guid_base: int | None = None) -> Host:
    n = next(_seq)
    zone = Zone.objects.get_or_create(name="z1", defaults={"region": Region.objects.get_or_create(name="r1")[0]})[0]
    host = Host.objects.create(name=f"nh{n}-{uuid.uuid4().hex[:4]}", zone=zone, serial=f"NS{uuid.uuid4().hex}")
    base = guid_base if guid_base is not None else (0x0C42A10300000000 | (n << 8))
    for i in range(ports):
        leaf_port = (HcaPort.objects.filter(leaf_switch=leaf).count() + 1) if leaf else None
        HcaPort.objects.create(host=host, device=f"mlx5_{i}", port_guid=f"0x{base + 2 * i + 1:016x}", fabric=fabric,
                               rail=i, leaf_switch=leaf, leaf_port=leaf_port)
    return host


def vpc_with_subnet(tenant: Tenant, *, cidr="10.0.0.0/16", subnet="10.0.1.0/24", name="vpc1"):
    vpc = services.vpc_create(actor=tenant.user, project=tenant.project, name=name, cidr=cidr)
    sn = services.subnet_create(actor=tenant.user, vpc=vpc, name="sn1", cidr=subnet)
    return vpc, sn
