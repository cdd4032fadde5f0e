"""Address math for VPCs, subnets and ports, on the standard `ipaddress` module. No database.

Rules and their sources:
- VPC IPv4 CIDRs come from RFC 1918 (10/8, 172.16/12, 192.168/16) or from ranges the operator allows
  (`settings.NETWORKING_ALLOWED_VPC_CIDRS`); IPv6 VPC CIDRs from RFC 4193 unique local addresses (fc00::/7)
  or operator-allowed ranges.
- Subnets lie inside their VPC's CIDR of the same family and do not overlap each other inside one VPC (all
  subnets of a VPC attach to its one router; Neutron rejects the same case: RW-047).
- IPv4: the network and broadcast addresses are never assigned; the gateway defaults to the first host and the
  DHCP range to the second host .. last host. IPv6: the subnet-router anycast address (the network address,
  RFC 4291 2.6.1) is never assigned; the gateway defaults to ::1 of the prefix.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

RFC1918 = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
RFC4193 = (ipaddress.ip_network("fc00::/7"),)

# Smallest subnets we accept: an IPv4 /29 has 6 hosts (gateway + 5); IPv6 subnets up to /124.
MAX_PREFIX = {4: 29, 6: 124}
MIN_VPC_PREFIX = {4: 8, 6: 32}


class AddressError(ValueError):
    """Invalid address input; `field` names the input field, `code` the stable API error code."""

    def __init__(self, message: str, *, field: str, code: str = "invalid_address"):
        super().__init__(message)
        self.field = field
        self.code = code


class AddressErrors(AddressError):
    """Several bad address fields at once (`errors`: the `AddressError`s, in field order); its own message, field
    and code are the first one's."""

    def __init__(self, errors: list[AddressError]):
        super().__init__(str(errors[0]), field=errors[0].field, code=errors[0].code)
        self.errors = list(errors)


def parse_network(text: str, *, field: str, strict: bool = True) -> IPNetwork:
    """Parse a CIDR. With `strict`, host bits set (10.0.0.5/24) are an error, as is a missing prefix."""
    try:
        if strict and "/" not in str(text):
            raise ValueError("missing prefix length")
        return ipaddress.ip_network(str(text).strip(), strict=strict)
    except ValueError as exc:
        raise AddressError(f"{text!r} is not a valid CIDR ({exc}).", field=field, code="invalid_cidr")


def parse_address(text: str, *, field: str) -> IPAddress:
    try:
        return ipaddress.ip_address(str(text).strip())
    except ValueError:
        raise AddressError(f"{text!r} is not an IP address.", field=field)


def check_vpc_cidr(cidr: IPNetwork, allowed_extra: Iterable[str] = (), *, field: str = "cidr") -> None:
    """Raise unless `cidr` is inside RFC 1918 / RFC 4193 or one of the operator-allowed ranges, and can hold at
    least the smallest subnet (`MAX_PREFIX`: a /30, /31 or /32 IPv4 VPC could never hold one, 400
    `vpc_cidr_too_small`)."""
    if cidr.prefixlen < MIN_VPC_PREFIX[cidr.version]:
        raise AddressError(f"A VPC CIDR must be /{MIN_VPC_PREFIX[cidr.version]} or smaller.", field=field,
                           code="vpc_cidr_too_large")
    if cidr.prefixlen > MAX_PREFIX[cidr.version]:
        raise AddressError(f"A VPC CIDR must be /{MAX_PREFIX[cidr.version]} or larger, to hold a subnet.",
                           field=field, code="vpc_cidr_too_small")
    allowed = [*(RFC1918 if cidr.version == 4 else RFC4193), *(ipaddress.ip_network(n) for n in allowed_extra)]
    if not any(cidr.version == net.version and cidr.subnet_of(net) for net in allowed):
        ranges = "RFC 1918 (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16)" if cidr.version == 4 else "fc00::/7"
        raise AddressError(f"{cidr} is not inside {ranges} or a range the operator allows.", field=field,
                           code="vpc_cidr_not_allowed")


def check_subnet_fits(cidr: IPNetwork, *, vpc_cidr: IPNetwork | None, siblings: dict[str, IPNetwork]) -> None:
    """The subnet lies inside the VPC CIDR of its family and overlaps none of `siblings` (name → CIDR)."""
    if cidr.prefixlen > MAX_PREFIX[cidr.version]:
        raise AddressError(f"A subnet must be /{MAX_PREFIX[cidr.version]} or larger.", field="cidr",
                           code="subnet_too_small")
    if vpc_cidr is None:
        raise AddressError(f"The VPC has no IPv{cidr.version} CIDR.", field="cidr", code="subnet_outside_vpc")
    if not cidr.subnet_of(vpc_cidr):
        raise AddressError(f"{cidr} is not inside the VPC's {vpc_cidr}.", field="cidr", code="subnet_outside_vpc")
    for name, other in sorted(siblings.items()):
        if other.version == cidr.version and cidr.overlaps(other):
            raise AddressError(f"{cidr} overlaps subnet {name!r} ({other}) in the same VPC.", field="cidr",
                               code="subnet_overlap")


@dataclass(frozen=True)
class SubnetPlan:
    """Gateway and DHCP range of a subnet (all inside `cidr`)."""

    cidr: IPNetwork
    gateway: IPAddress
    dhcp_start: IPAddress
    dhcp_end: IPAddress


def _usable(cidr: IPNetwork) -> tuple[IPAddress, IPAddress]:
    if cidr.version == 4:
        return cidr.network_address + 1, cidr.broadcast_address - 1
    return cidr.network_address + 1, cidr.broadcast_address


def plan_subnet(cidr: IPNetwork, *, gateway: str | None = None, dhcp_start: str | None = None,
                dhcp_end: str | None = None) -> SubnetPlan:
    """Defaults and checks for a subnet's gateway and DHCP range; raises `AddressError` naming the field."""
    first, last = _usable(cidr)
    gw = parse_address(gateway, field="gateway_ip") if gateway else first
    if gw.version != cidr.version or not first <= gw <= last:
        raise AddressError(f"Gateway {gw} is not a usable address of {cidr}.", field="gateway_ip")
    start = parse_address(dhcp_start, field="dhcp_start") if dhcp_start else (first + 1 if gw == first else first)
    end = parse_address(dhcp_end, field="dhcp_end") if dhcp_end else (last if gw != last else last - 1)
    for name, addr in (("dhcp_start", start), ("dhcp_end", end)):
        if addr.version != cidr.version or not first <= addr <= last:
            raise AddressError(f"{addr} is not a usable address of {cidr}.", field=name)
    if start > end:
        raise AddressError("dhcp_start must not be after dhcp_end.", field="dhcp_start")
    if start <= gw <= end:
        raise AddressError(f"The DHCP range {start}-{end} includes the gateway {gw}.", field="gateway_ip")
    return SubnetPlan(cidr=cidr, gateway=gw, dhcp_start=start, dhcp_end=end)


def check_fixed_ip(addr: IPAddress, *, cidr: IPNetwork, gateway: IPAddress, field: str = "ip_addresses") -> None:
    """A requested fixed IP must be a usable address of the subnet other than its gateway."""
    first, last = _usable(cidr)
    if addr.version != cidr.version or not first <= addr <= last:
        raise AddressError(f"{addr} is not a usable address of {cidr}.", field=field)
    if addr == gateway:
        raise AddressError(f"{addr} is the subnet's gateway.", field=field, code="ip_is_gateway")


def next_free(start: IPAddress, end: IPAddress, taken: set[IPAddress]) -> IPAddress | None:
    """The lowest address in [start, end] not in `taken`, or None when the range is full.

    Walks at most len(taken) + 1 addresses, so it is O(allocated), not O(range)."""
    addr = start
    while addr <= end:
        if addr not in taken:
            return addr
        addr += 1
    return None


def random_mac(prefix: str, rand: int) -> str:
    """A MAC from a locally administered unicast `prefix` ("0a:58") and random bits `rand`."""
    octets = [int(x, 16) for x in prefix.split(":") if x]
    if not octets or octets[0] & 0x01 or not octets[0] & 0x02:
        raise ValueError("MAC prefix must be locally administered unicast (second-lowest bit of octet 1 set)")
    missing = 6 - len(octets)
    tail = [(rand >> (8 * i)) & 0xFF for i in range(missing)]
    return ":".join(f"{o:02x}" for o in [*octets, *tail])


def canonical_mac(text: str) -> str:
    """`0A-58-00-00-00-01` → `0a:58:00:00:00:01`; raises `AddressError` for anything but a unicast MAC."""
    raw = str(text).strip().lower().replace("-", ":")
    parts = raw.split(":")
    if len(parts) != 6 or not all(len(p) == 2 and all(c in "0123456789abcdef" for c in p) for p in parts):
        raise AddressError(f"{text!r} is not a MAC address.", field="mac_address")
    if int(parts[0], 16) & 0x01:
        raise AddressError(f"{text!r} is a multicast MAC.", field="mac_address")
    return raw


def check_allowed_address_pair(text: str, *, subnet_gateway: IPAddress, staff: bool) -> IPNetwork:
    """Validate one allowed-address pair (an extra source prefix a port may send from; RW-072).

    400 for multicast prefixes (Neutron bug 2147115) and for the subnet's gateway as a host prefix (our
    service address: router, DHCP server; Neutron refuses the metadata port's IP the same way); 403
    `catch_all_address_pair` for 0.0.0.0/0 or ::/0 unless `staff` (it disables source checks: flagged on the port).
    Host bits are cleared (10.0.0.5/24 → 10.0.0.0/24); a bare address is a host prefix."""
    net = parse_network(text, field="allowed_address_pairs", strict=False)
    if net.is_multicast:
        raise AddressError(f"{net} is a multicast prefix.", field="allowed_address_pairs", code="invalid_address_pair")
    if net.num_addresses == 1 and net.network_address == subnet_gateway:
        raise AddressError(f"{net} is the subnet's gateway (router and DHCP server).", field="allowed_address_pairs",
                           code="invalid_address_pair")
    if net.prefixlen == 0 and not staff:
        raise AddressError("A catch-all pair disables spoofing protection; only the provider may set it.",
                           field="allowed_address_pairs", code="catch_all_address_pair")
    return net
