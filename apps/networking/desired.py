"""Desired fabric state computed from the database (pure reads; the drivers' dataclasses out).

OVN naming (stable, derived from our UUIDs, so a retry finds what the last try made):
  VPC → router `gpc-r-<vpc id>`; subnet → switch `gpc-s-<subnet id>`, router port `gpc-rp-<subnet id>` and its
  peer LSP `gpc-rsp-<subnet id>`; port → LSP `gpc-p-<port id hex>`; security group → port group
  `pg_<sg id hex>`; public IP pool → external switch `gpc-ext-<pool id>` with a localnet port; a VPC with public
  IPs → gateway router port `gpc-gw-<vpc id>` (on the gateway chassis), a default route to the pool's gateway,
  SNAT of the VPC CIDR and one dnat_and_snat per floating IP bound to a port. Subnets with DHCP get a
DHCP_Options row that their ports reference (IPv4: gateway as server and router; IPv6: stateful DHCPv6, which the
router port announces in its router advertisements), with the subnet's DNS servers.

Security groups → ACLs (ovn-nb(5) ACL table): every port is in the port group `pg_gpc_default_drop`, whose
priority 1001 ACLs drop all IP to and from it (a port is closed unless a rule opens it: the default deny, also
between tenants) and whose priority 1002 ACLs let DHCPv4 requests and IPv6 neighbour discovery pass; each
security group's port group carries one priority 1002 `allow-related` ACL per rule (a port in several groups
gets the union). One shared drop group instead of drops per group keeps the ACL count at one per rule.
"""
from __future__ import annotations

import hashlib
import ipaddress
import uuid
from collections import defaultdict
from typing import NamedTuple

from apps.inventory.models import Fabric, HcaPort, Switch, SwitchLink

from .drivers.base import (
    Acl,
    DhcpOptions,
    LogicalRouter,
    LogicalSwitch,
    LogicalSwitchPort,
    Nat,
    OvnTopology,
    PartitionMemberSpec,
    PartitionSpec,
    PortGroup,
    Route,
    RouterPort,
)
from .drivers.ibsim import SimHca, SimLink, SimSwitch, render_topology
from .models import IbPartition, IpAllocation, Port, PublicIp, SecurityGroup, SecurityGroupRule, Subnet, Vpc
from .pkeys import parse_guid
from .sg_rules import CanonicalRule, ovn_match
from .states import IB_MTU_CODES, IB_RATE_CODES, PublicIpKind

PRIO_DROP, PRIO_ALLOW = 1001, 1002


def router_name(vpc_id) -> str:
    return f"gpc-r-{vpc_id}"


def switch_name(subnet_id) -> str:
    return f"gpc-s-{subnet_id}"


def lsp_name(port_id) -> str:
    """The LSP (and the hypervisor's `iface-id`) of a port: `gpc-p-<32 hex digits>`. Not the dashed UUID, which
    ovn-trace abbreviates to six digits (ambiguous with time-ordered UUIDv7 ids)."""
    return f"gpc-p-{port_id.hex}"


def port_group_name(sg_id) -> str:
    return f"pg_{sg_id.hex}"


def derived_mac(seed: str) -> str:
    """A stable locally administered MAC for router ports (0a:5a + 4 bytes of sha256(seed))."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "0a:5a:" + ":".join(f"{b:02x}" for b in digest[:4])


def _pairs(**kw) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((f"gpucloud:{k}", str(v)) for k, v in kw.items()))


DROP_GROUP = "pg_gpc_default_drop"


def _drop_group(lsp_names: list[str]) -> PortGroup:
    """Every tenant port is in this group: IP to and from it is dropped unless a security group allows it
    (so a port is closed by default, also towards other tenants); DHCPv4 and IPv6 neighbour discovery pass."""
    pg = DROP_GROUP
    acls = (Acl("to-lport", PRIO_DROP, f"outport == @{pg} && ip", "drop"),
            Acl("from-lport", PRIO_DROP, f"inport == @{pg} && ip", "drop"),
            Acl("from-lport", PRIO_ALLOW, f"inport == @{pg} && udp && udp.src == 68 && udp.dst == 67", "allow"),
            Acl("from-lport", PRIO_ALLOW, f"inport == @{pg} && icmp6 && icmp6.type == {{133, 135, 136}}", "allow"),
            Acl("to-lport", PRIO_ALLOW, f"outport == @{pg} && icmp6 && icmp6.type == {{134, 135, 136}}", "allow"))
    return PortGroup(pg, tuple(sorted(lsp_names)), acls, external_ids=_pairs(role="default-drop"))


def _sg_acls(sg: SecurityGroup, rules: list[SecurityGroupRule]) -> tuple[Acl, ...]:
    pg = port_group_name(sg.id)
    acls = []
    for r in rules:
        canon = CanonicalRule(r.direction, r.ethertype, r.protocol, r.port_range_min, r.port_range_max,
                              r.icmp_type, r.icmp_code, r.remote_ip_prefix)
        remote = port_group_name(r.remote_group_id) if r.remote_group_id else None
        acls.append(Acl("to-lport" if r.direction == "ingress" else "from-lport", PRIO_ALLOW,
                        ovn_match(canon, port_group=pg, remote_group_pg=remote), "allow-related"))
    return tuple(acls)


class _PortRow(NamedTuple):
    id: uuid.UUID
    subnet_id: uuid.UUID
    mac_address: str
    allowed_address_pairs: list
    physical_network: str


def ovn_topology(*, gateway_chassis: str) -> OvnTopology:
    """Everything the database wants in OVN (a handful of queries, whatever the number of VPCs)."""
    vpcs = list(Vpc.objects.all().order_by("id"))
    subnets = defaultdict(list)
    for s in Subnet.objects.all().order_by("id"):
        subnets[s.vpc_id].append(s)
    ports = defaultdict(list)
    addresses = defaultdict(list)
    port_groups = defaultdict(list)
    # plain tuples, not model instances: this runs for every port on every reconcile
    all_ports = [_PortRow(*row) for row in
                 Port.objects.order_by("id").values_list("id", "subnet_id", "mac_address", "allowed_address_pairs",
                                                         "physical_network")]
    for p in all_ports:
        ports[p.subnet_id].append(p)
    for port_id, address in IpAllocation.objects.order_by("port_id", "address").values_list("port_id", "address"):
        addresses[port_id].append(address)       # PostgreSQL orders inet values numerically
    for port_id, sg_id in Port.security_groups.through.objects.values_list("port_id", "securitygroup_id"):
        port_groups[sg_id].append(lsp_name(port_id))
    rules = defaultdict(list)
    for r in SecurityGroupRule.objects.all().order_by("id"):
        rules[r.security_group_id].append(r)
    pips = defaultdict(list)
    for pip in PublicIp.objects.select_related("pool").order_by("address"):
        pips[pip.vpc_id].append(pip)
    port_v4 = {p.id: next((a for a in addresses[p.id] if ":" not in a), None) for p in all_ports}

    switches, routers, pools, dhcp = [], [], {}, []
    for vpc in vpcs:
        rports, nats, routes = [], [], []
        for s in subnets[vpc.id]:
            net = ipaddress.ip_network(s.cidr)
            mac = derived_mac(f"rp-{s.id}")
            ra = (("address_mode", "dhcpv6_stateful"), ("send_periodic", "true")) \
                if s.ip_version == 6 and s.enable_dhcp else ()
            rports.append(RouterPort(f"gpc-rp-{s.id}", mac, (f"{s.gateway_ip}/{net.prefixlen}",), ipv6_ra_configs=ra))
            lsps = [LogicalSwitchPort(f"gpc-rsp-{s.id}", ("router",), (), "router",
                                      (("router-port", f"gpc-rp-{s.id}"),))]
            v4_key = v6_key = ""
            if s.enable_dhcp:
                dhcp.append(_dhcp_options(s, mac))
                v4_key, v6_key = (str(s.id), "") if s.ip_version == 4 else ("", str(s.id))
            for p in ports[s.id]:
                entry = " ".join([p.mac_address, *addresses[p.id]])
                security = " ".join([p.mac_address, *addresses[p.id], *p.allowed_address_pairs])
                lsps.append(LogicalSwitchPort(lsp_name(p.id), (entry,), (security,), dhcpv4_options=v4_key,
                                              dhcpv6_options=v6_key,
                                              type="external" if p.physical_network else ""))
            lsps += _localnet_ports(s, ports[s.id])
            switches.append(LogicalSwitch(switch_name(s.id), tuple(lsps),
                                          external_ids=_pairs(subnet=s.id, vpc=vpc.id, project=vpc.project_id)))
        gateway = next((p for p in pips[vpc.id] if p.kind == PublicIpKind.ROUTER_GATEWAY), None)
        if gateway is not None:
            pool = gateway.pool
            pools[pool.id] = pool
            prefix = ipaddress.ip_network(pool.cidr).prefixlen
            rports.append(RouterPort(f"gpc-gw-{vpc.id}", derived_mac(f"gw-{vpc.id}"), (f"{gateway.address}/{prefix}",),
                                     gateway_chassis=gateway_chassis))
            routes.append(Route("0.0.0.0/0", pool.gateway_ip))
            nats.append(Nat("snat", gateway.address, vpc.cidr))
            nats += [Nat("dnat_and_snat", p.address, port_v4[p.port_id]) for p in pips[vpc.id]
                     if p.kind == PublicIpKind.FLOATING and p.port_id and port_v4.get(p.port_id)]
        routers.append(LogicalRouter(router_name(vpc.id), tuple(rports), tuple(nats), tuple(routes),
                                     external_ids=_pairs(vpc=vpc.id, project=vpc.project_id)))
    switches += _external_switches(pools, pips, vpcs)
    groups = [PortGroup(port_group_name(sg.id), tuple(sorted(port_groups[sg.id])), _sg_acls(sg, rules[sg.id]),
                        external_ids=_pairs(security_group=sg.id, project=sg.project_id))
              for sg in SecurityGroup.objects.all().order_by("id")]
    groups.append(_drop_group([lsp_name(p.id) for p in all_ports]))
    return OvnTopology(tuple(routers), tuple(switches), tuple(groups), tuple(dhcp))


def localnet_name(subnet_id, physical_network: str) -> str:
    return f"gpc-ln-{subnet_id}-{physical_network}"


def _localnet_ports(subnet: Subnet, ports: list) -> list[LogicalSwitchPort]:
    """Bare metal (ADR 1212): one localnet port per physical network a bare-metal port of the subnet is on,
    `network_name` that network (the chassis' ovn-bridge-mappings name it), `tag_request` the subnet's VLAN id;
    the servers' own ports are `external` LSPs (OVN answers their DHCP from the chassis serving them)."""
    nets = sorted({p.physical_network for p in ports if p.physical_network})
    if not nets or subnet.baremetal_vlan is None:
        return []
    return [LogicalSwitchPort(localnet_name(subnet.id, n), ("unknown",), (), "localnet", (("network_name", n),),
                              tag_request=subnet.baremetal_vlan) for n in nets]


def _dhcp_options(subnet: Subnet, router_mac: str) -> DhcpOptions:
    """OVN native DHCP (ovn-nb(5) DHCP_Options). IPv4: the gateway answers as server and router, 12 h leases.
    IPv6 (stateful DHCPv6, announced by the router port's RAs): the router port's MAC is the server id. DNS servers
    when the subnet has them."""
    if subnet.ip_version == 4:
        options = [("lease_time", "43200"), ("router", subnet.gateway_ip), ("server_id", subnet.gateway_ip),
                   ("server_mac", router_mac)]
    else:
        options = [("server_id", router_mac)]
    if subnet.dns_nameservers:
        options.append(("dns_server", "{" + ", ".join(subnet.dns_nameservers) + "}"))
    return DhcpOptions(str(subnet.id), subnet.cidr, tuple(sorted(options)))


def _external_switches(pools: dict, pips: dict, vpcs: list) -> list[LogicalSwitch]:
    out = []
    for pool in sorted(pools.values(), key=lambda p: p.name):
        lsps = [LogicalSwitchPort(f"gpc-ln-{pool.id}", ("unknown",), (), "localnet",
                                  (("network_name", pool.network_name),))]
        for vpc in vpcs:
            if any(p.kind == PublicIpKind.ROUTER_GATEWAY and p.pool_id == pool.id for p in pips[vpc.id]):
                lsps.append(LogicalSwitchPort(f"gpc-gwsp-{vpc.id}", ("router",), (), "router",
                                              (("router-port", f"gpc-gw-{vpc.id}"),)))
        out.append(LogicalSwitch(f"gpc-ext-{pool.id}", tuple(lsps), external_ids=_pairs(pool=pool.name)))
    return out


def ib_partitions(fabric: Fabric) -> list[PartitionSpec]:
    """The fabric's partitions and members as the SM must enforce them."""
    out = []
    for part in IbPartition.objects.filter(fabric=fabric).prefetch_related("members").order_by("pkey"):
        members = tuple(PartitionMemberSpec(m.guid, m.membership) for m in part.members.all())
        out.append(PartitionSpec(
            name=f"{part.name}-{str(part.project_id)[:8]}", pkey=part.pkey, members=members, ipoib=part.ipoib,
            index0=part.index0, mtu_code=IB_MTU_CODES.get(part.mtu) if part.mtu else None,
            rate_code=IB_RATE_CODES.get(part.rate_gbps) if part.rate_gbps else None, sl=part.sl))
    return out


def expected_pkey_tables(partitions: list[PartitionSpec], guids: list[str]) -> dict[str, set[int]]:
    """What `smpquery pkeys` must show per port: the default partition as a limited member (0x7fff) plus each
    partition of the port with the membership bit for full members."""
    tables = {g: {0x7FFF} for g in guids}
    for p in partitions:
        for m in p.members:
            if m.guid in tables:
                tables[m.guid].add(p.pkey | (0x8000 if m.membership == "full" else 0))
    return tables


def _switch_guid(sw: Switch) -> int:
    if sw.node_guid:
        return parse_guid(sw.node_guid)
    return int.from_bytes(hashlib.sha256(f"switch:{sw.name}".encode()).digest()[:8], "big") | (1 << 57)


def ibsim_topology(fabric: Fabric) -> str:
    """An ibsim topology of `fabric` from inventory: its switches and inter-switch links, and every HCA port
    cabled to a leaf (port GUID from inventory; ibsim numbers a CA's port 1 as node GUID + 1, so the simulated
    node GUID is port GUID - 1; node and port GUIDs live in separate tables in OpenSM). A spine hosts the SM. Raises ValueError on duplicate GUIDs or double-used switch ports."""
    switches = list(Switch.objects.filter(fabric=fabric).order_by("name"))
    switches.sort(key=lambda s: (s.role == "leaf", s.name))
    ports = list(HcaPort.objects.filter(fabric=fabric, leaf_switch__isnull=False, leaf_port__isnull=False)
                 .select_related("host", "leaf_switch").order_by("port_guid"))
    links = list(SwitchLink.objects.filter(a_switch__fabric=fabric, b_switch__fabric=fabric)
                 .select_related("a_switch", "b_switch"))
    used: dict[str, int] = defaultdict(int)
    for p in ports:
        used[p.leaf_switch.name] = max(used[p.leaf_switch.name], p.leaf_port)
    for link in links:
        used[link.a_switch.name] = max(used[link.a_switch.name], link.a_port)
        used[link.b_switch.name] = max(used[link.b_switch.name], link.b_port)
    sim_switches = [SimSwitch(s.name, _switch_guid(s), max(s.port_count, used[s.name], 1)) for s in switches]
    hcas = [SimHca(f"{p.host.name} {p.device}/{p.port_number}", parse_guid(p.port_guid) - 1,
                   parse_guid(p.port_guid), p.leaf_switch.name, p.leaf_port) for p in ports]
    sim_links = [SimLink(lk.a_switch.name, lk.a_port, lk.b_switch.name, lk.b_port) for lk in links]
    return render_topology(sim_switches, hcas, sim_links)
