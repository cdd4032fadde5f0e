"""Fabric driver interfaces: frozen dataclasses in and out, `apps.core.drivers` exceptions out, no ORM.

Two ports:

- `OvnNetworkDriver.sync(OvnTopology) -> SyncResult`: make the OVN northbound database hold exactly the
  gpucloud-owned routers, switches, ports, port groups, ACLs, NAT rules and routes of the topology (objects
  without our owner mark are never touched). A second call with the same topology makes no transaction.
- `IbPartitionDriver.apply(partitions) -> IbApplyResult`: make the subnet manager enforce exactly these
  partitions (plus the default partition, every port a limited member); `read_pkeys(guid)` reads a port's
  P_Key table back from the fabric.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

OWNER_KEY = "gpucloud:managed"


@dataclass(frozen=True)
class LogicalSwitchPort:
    """An LSP. `addresses`/`port_security` entries are "MAC IP [IP ...]" strings (ovn-nb(5))."""

    name: str
    addresses: tuple[str, ...] = ()
    port_security: tuple[str, ...] = ()
    type: str = ""
    options: tuple[tuple[str, str], ...] = ()
    dhcpv4_options: str = ""            # key of a DhcpOptions in the topology ("" = none)
    dhcpv6_options: str = ""
    tag_request: int | None = None      # a localnet port's VLAN id (ovn-nb(5) tag_request)


@dataclass(frozen=True)
class DhcpOptions:
    """OVN native DHCP (v4 or v6) for one subnet (ovn-nb(5) DHCP_Options): `key` names it for its LSPs."""

    key: str
    cidr: str
    options: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class LogicalSwitch:
    name: str
    ports: tuple[LogicalSwitchPort, ...] = ()
    other_config: tuple[tuple[str, str], ...] = ()
    external_ids: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class RouterPort:
    """An LRP: `networks` are "IP/prefixlen"; `gateway_chassis` set for the external (NAT) port."""

    name: str
    mac: str
    networks: tuple[str, ...]
    gateway_chassis: str = ""
    ipv6_ra_configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Nat:
    type: str               # snat | dnat_and_snat
    external_ip: str
    logical_ip: str


@dataclass(frozen=True)
class Route:
    prefix: str
    nexthop: str


@dataclass(frozen=True)
class LogicalRouter:
    name: str
    ports: tuple[RouterPort, ...] = ()
    nats: tuple[Nat, ...] = ()
    routes: tuple[Route, ...] = ()
    external_ids: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Acl:
    direction: str          # from-lport | to-lport
    priority: int
    match: str
    action: str             # allow-related | allow | drop


@dataclass(frozen=True)
class PortGroup:
    """Name matches `[A-Za-z_][A-Za-z0-9_]*` (it appears as `@name` and `$name_ip4` in matches)."""

    name: str
    ports: tuple[str, ...] = ()        # LSP names
    acls: tuple[Acl, ...] = ()
    external_ids: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class OvnTopology:
    routers: tuple[LogicalRouter, ...] = ()
    switches: tuple[LogicalSwitch, ...] = ()
    port_groups: tuple[PortGroup, ...] = ()
    dhcp_options: tuple[DhcpOptions, ...] = ()


@dataclass
class SyncResult:
    """`transactions` committed and `commands` (row writes) issued; zero of both when nothing differed."""

    transactions: int = 0
    commands: int = 0
    created: int = 0
    updated: int = 0
    deleted: int = 0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class OvnNetworkDriver(Protocol):
    def sync(self, topology: OvnTopology) -> SyncResult: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class PartitionMemberSpec:
    guid: str               # 0x + 16 hex digits
    membership: str         # full | limited


@dataclass(frozen=True)
class PartitionSpec:
    """One tenant partition: 15-bit `pkey`, IPoIB broadcast group flags (IBTA codes), members."""

    name: str
    pkey: int
    members: tuple[PartitionMemberSpec, ...] = ()
    ipoib: bool = False
    index0: bool = False
    mtu_code: int | None = None
    rate_code: int | None = None
    sl: int | None = None


@dataclass
class IbApplyResult:
    """`writes`: files written (0 when the SM already had this state); `drift`: the file on disk differed from
    the last good one, or was missing, unreadable or invalid (`drift_reason`: ``missing`` | ``unreadable`` |
    ``invalid`` | ``modified``); `restored`: a bad file was replaced."""

    changed: bool = False
    writes: int = 0
    drift: bool = False
    drift_reason: str = ""
    restored: bool = False
    digest: str = ""
    details: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class IbPartitionDriver(Protocol):
    def apply(self, partitions: Sequence[PartitionSpec], *, expect_file: bool = False) -> IbApplyResult: ...

    def read_pkeys(self, guid: str) -> list[int]: ...
