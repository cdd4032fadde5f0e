"""Authorization-matrix entries of the networking app: VPCs, subnets, security groups and rules, ports, public
IPs and their pools, InfiniBand partitions and P_Key pools."""
from apps.inventory.models import Fabric, Region
from apps.networking import services
from apps.networking.models import SecurityGroup

from .framework import Case, Entry, expect

LIST = expect(other_org=200)
# project members write; a body naming project A's objects is "not found" (400) for another tenant
CREATE = expect(other_org=400, viewer=403, member=201, admin=201, read_token=403, staff=403)
CHANGE = expect(other_org=404, viewer=403, member=200, admin=200, read_token=403, staff=403)
DELETE = expect(other_org=404, viewer=403, member=204, admin=204, read_token=403, staff=403)
STAFF_READ = expect(other_org=404, viewer=404, member=404, admin=404, read_token=404, staff=200)
STAFF_CREATE = expect(other_org=403, viewer=403, member=403, admin=403, read_token=403, staff=201)
# provider-internal (IsStaffOperator): tenants get 404, as for what they may not see
STAFF_ONLY_CREATE = expect(other_org=404, viewer=404, member=404, admin=404, read_token=404, staff=201)


def _vpc(world, name="authz-vpc"):
    return services.vpc_create(actor=None, project=world.project_a, name=name, cidr="10.0.0.0/16")


def _subnet(world):
    return services.subnet_create(actor=None, vpc=_vpc(world), name="sn", cidr="10.0.1.0/24")


def _port(world):
    return services.port_create(actor=None, subnet=_subnet(world))


def _pool():
    from apps.networking.models import PublicIpPool

    existing = PublicIpPool.objects.filter(name="ext").first()  # the provider's pool, shared by every project
    return existing or services.public_ip_pool_create(actor=None, name="ext", cidr="203.0.113.0/24", first_ip="203.0.113.10",
                                          last_ip="203.0.113.20", gateway_ip="203.0.113.1")


def _fabric():
    region = Region.objects.get_or_create(name="authz-r")[0]
    return Fabric.objects.get_or_create(name="authz-ib", defaults={"kind": "infiniband", "region": region})[0]


def _pkey_fabric():
    fabric = _fabric()
    services.pkey_pool_set(actor=None, fabric=fabric, first_pkey=0x100, last_pkey=0x1FF)
    return fabric


def _hca_port():
    from tests.networking.helpers import host_with_hca

    return host_with_hca(_fabric()).hca_ports.get()


def _pk(factory):
    return lambda w: Case(kwargs={"pk": factory(w).pk})


def _sg(world):
    return services.security_group_create(actor=None, vpc=_vpc(world), name="web")


def _rule(world):
    return services.security_group_rule_create(actor=None, security_group=_sg(world), direction="ingress",
                                               protocol="tcp", port_range_min=22, port_range_max=22)


def _public_ip(world):
    port = _port(world)
    return services.public_ip_create(actor=None, vpc=port.vpc, pool=_pool())


def _partition(world):
    return services.ib_partition_create(actor=None, project=world.project_a, fabric=_pkey_fabric(), name="p1")


def _service_port(world) -> Case:
    from tests.networking.helpers import host_with_hca

    part = _partition(world)
    port = host_with_hca(part.fabric).hca_ports.get()
    return Case(kwargs={"pk": part.pk}, data={"hca_port": str(port.pk)})


def _instance_guid_case(world, *, added: bool) -> Case:
    """Project A: an instance's host port in partition p1 and a partition p2; with `added`, the port is also a
    limited member of p2 added through the API (so it can be removed)."""
    import uuid

    from tests.networking.helpers import host_with_hca

    part = _partition(world)
    other = services.ib_partition_create(actor=None, project=world.project_a, fabric=part.fabric, name="p2")
    host = host_with_hca(part.fabric)
    services.ib_partition_join_whole_host(actor=None, partition=part, host=host, instance_id=uuid.uuid4())
    guid = host.hca_ports.get().port_guid
    if added:
        services.ib_partition_member_add(actor=None, partition=other, guid=guid)
        return Case(kwargs={"pk": other.pk, "guid": guid})
    return Case(kwargs={"pk": other.pk}, data={"guid": guid})


ENTRIES = [
    Entry("GET", "/api/v1/vpcs", LIST),
    Entry("POST", "/api/v1/vpcs", CREATE,
          lambda w: Case(data={"project": str(w.project_a.pk), "name": "new", "cidr": "10.0.0.0/16"})),
    Entry("GET", "/api/v1/vpcs/{pk}", expect(), _pk(_vpc)),
    Entry("PATCH", "/api/v1/vpcs/{pk}", CHANGE, lambda w: Case(kwargs={"pk": _vpc(w).pk}, data={"description": "x"})),
    Entry("DELETE", "/api/v1/vpcs/{pk}", DELETE, _pk(_vpc)),
    Entry("GET", "/api/v1/subnets", LIST),
    Entry("POST", "/api/v1/subnets", CREATE,
          lambda w: Case(data={"vpc": str(_vpc(w).pk), "name": "sn", "cidr": "10.0.1.0/24"})),
    Entry("GET", "/api/v1/subnets/{pk}", expect(), _pk(_subnet)),
    Entry("DELETE", "/api/v1/subnets/{pk}", DELETE, _pk(_subnet)),
    Entry("GET", "/api/v1/security-groups", LIST),
    Entry("POST", "/api/v1/security-groups", CREATE,
          lambda w: Case(data={"vpc": str(_vpc(w).pk), "name": "web",
                               "rules": [{"direction": "ingress", "protocol": "tcp", "port_range_min": 22}]})),
    Entry("GET", "/api/v1/security-groups/{pk}", expect(), _pk(_sg)),
    Entry("DELETE", "/api/v1/security-groups/{pk}", DELETE, _pk(_sg)),
    Entry("GET", "/api/v1/security-group-rules", LIST),
    Entry("POST", "/api/v1/security-group-rules", CREATE,
          lambda w: Case(data={"security_group": str(SecurityGroup.objects.get(vpc=_vpc(w), is_default=True).pk),
                               "direction": "ingress", "protocol": "tcp", "port_range_min": 443,
                               "port_range_max": 443})),
    Entry("GET", "/api/v1/security-group-rules/{pk}", expect(), _pk(_rule)),
    Entry("DELETE", "/api/v1/security-group-rules/{pk}", DELETE, _pk(_rule)),
    Entry("GET", "/api/v1/ports", LIST),
    Entry("POST", "/api/v1/ports", CREATE, lambda w: Case(data={"subnet": str(_subnet(w).pk)})),
    Entry("GET", "/api/v1/ports/{pk}", expect(), _pk(_port)),
    Entry("PATCH", "/api/v1/ports/{pk}", CHANGE, lambda w: Case(kwargs={"pk": _port(w).pk}, data={"name": "eth0"})),
    Entry("DELETE", "/api/v1/ports/{pk}", DELETE, _pk(_port)),
    Entry("GET", "/api/v1/public-ips", LIST),
    Entry("POST", "/api/v1/public-ips", CREATE,
          lambda w: Case(data={"vpc": str(_vpc(w).pk), "pool": _pool().name})),
    Entry("GET", "/api/v1/public-ips/{pk}", expect(), _pk(_public_ip)),
    Entry("PATCH", "/api/v1/public-ips/{pk}", CHANGE,
          lambda w: Case(kwargs={"pk": (pip := _public_ip(w)).pk}, data={"port": str(pip.vpc.ports.first().pk)})),
    Entry("DELETE", "/api/v1/public-ips/{pk}", DELETE, _pk(_public_ip)),
    Entry("GET", "/api/v1/public-ip-pools", LIST),
    Entry("POST", "/api/v1/public-ip-pools", STAFF_CREATE,
          lambda w: Case(data={"name": "ext2", "cidr": "198.51.100.0/24", "first_ip": "198.51.100.10",
                               "last_ip": "198.51.100.99", "gateway_ip": "198.51.100.1"})),
    Entry("GET", "/api/v1/ib-partitions", LIST),
    Entry("POST", "/api/v1/ib-partitions", CREATE,
          lambda w: Case(data={"project": str(w.project_a.pk), "fabric": _pkey_fabric().name, "name": "p1"})),
    Entry("GET", "/api/v1/ib-partitions/{pk}", expect(), _pk(_partition)),
    Entry("DELETE", "/api/v1/ib-partitions/{pk}", DELETE, _pk(_partition)),
    # staff make a shared service port a limited member; the permission comes before the object
    Entry("POST", "/api/v1/ib-partitions/{pk}/service-ports", STAFF_ONLY_CREATE, _service_port),
    # a project's own instance GUID as a limited member of another of its partitions; removing one so added
    Entry("POST", "/api/v1/ib-partitions/{pk}/members",
          expect(other_org=404, viewer=403, member=201, admin=201, read_token=403, staff=201),
          lambda w: _instance_guid_case(w, added=False)),
    # a partition's members are the fabric's too: staff operators add and remove them (ADR 0704), the partition
    # itself is the tenant's (staff 403 `staff_not_member` above, docs/adr/0104)
    Entry("DELETE", "/api/v1/ib-partitions/{pk}/members/{guid}",
          expect(other_org=404, viewer=403, member=204, admin=204, read_token=403, staff=204),
          lambda w: _instance_guid_case(w, added=True)),
    Entry("GET", "/api/v1/pkey-pools", STAFF_READ),
    Entry("POST", "/api/v1/pkey-pools", STAFF_ONLY_CREATE,
          lambda w: Case(data={"fabric": _fabric().name, "first_pkey": "0x0100", "last_pkey": "0x01ff"})),
    Entry("GET", "/api/v1/pkey-pools/{pk}", STAFF_READ, lambda w: Case(kwargs={"pk": _pkey_fabric().pkey_pool.pk})),
    Entry("GET", "/api/v1/virtual-guid-pools", STAFF_READ),
    Entry("POST", "/api/v1/virtual-guid-pools", STAFF_ONLY_CREATE,
          lambda w: Case(data={"hca_port": str(_hca_port().pk), "first_guid": "0x0200000000000000", "size": 16})),
    Entry("GET", "/api/v1/virtual-guid-pools/{pk}", STAFF_READ,
          lambda w: Case(kwargs={"pk": services.virtual_guid_pool_set(
              actor=None, hca_port=_hca_port(), first_guid="0x0200000000000000", size=16).pk})),
]
