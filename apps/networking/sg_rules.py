"""Security-group rule validation and canonical form (RW-048). No database.

Sources: the IANA protocol numbers registry; the checks Neutron applies in
`neutron/db/securitygroups_db.py` (`_validate_port_range`, `_make_canonical_port_range`,
`_validate_ethertype_and_protocol`, `_validate_ip_prefix`), listed as case RW-048 in the shared real-world cases:

- ports only for tcp, udp, udplite, sctp, dccp; 1 <= min <= max <= 65535; 1-65535 is stored as "all ports"
  (no range);
- ICMP fields: type and code 0-255; a code needs a type; ICMP with ethertype IPv6 is stored as ipv6-icmp (58);
- protocol "any" (or empty) means no protocol match;
- the remote prefix must match the ethertype; a bare address is a host prefix (/32 or /128); host bits set in
  a prefix are cleared (10.0.0.5/24 → 10.0.0.0/24); the whole family (0.0.0.0/0, ::/0) is stored as no prefix,
  which means the same, so the duplicate check sees the two as one rule;
- a rule has a remote prefix or a remote group, not both (neither = any source/destination).
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

PROTOCOL_NUMBERS = {"icmp": 1, "igmp": 2, "tcp": 6, "udp": 17, "dccp": 33, "gre": 47, "esp": 50, "ah": 51,
                    "ipv6-icmp": 58, "sctp": 132, "udplite": 136}
_NAMES_BY_NUMBER = {v: k for k, v in PROTOCOL_NUMBERS.items()}
PORT_PROTOCOLS = frozenset({"tcp", "udp", "udplite", "sctp", "dccp"})
ICMP_PROTOCOLS = frozenset({"icmp", "ipv6-icmp"})
_ALIASES = {"icmpv6": "ipv6-icmp", "ipv6_icmp": "ipv6-icmp", "any": "", "all": "", "": ""}


_PORT_WORDS = {"port_range_min": "The first port", "port_range_max": "The last port"}


class RuleError(ValueError):
    def __init__(self, message: str, *, field: str, code: str = "invalid_security_group_rule"):
        super().__init__(message)
        self.field = field
        self.code = code


class RuleErrors(RuleError):
    """Several bad fields of one rule (`errors`: the `RuleError`s, in field order); its own message, field and
    code are the first one's."""

    def __init__(self, errors: list[RuleError]):
        super().__init__(str(errors[0]), field=errors[0].field, code=errors[0].code)
        self.errors = list(errors)


@dataclass(frozen=True)
class CanonicalRule:
    """A validated rule: `protocol` is "" (any), a name from PROTOCOL_NUMBERS, or a number as text."""

    direction: str
    ethertype: str
    protocol: str
    port_range_min: int | None
    port_range_max: int | None
    icmp_type: int | None
    icmp_code: int | None
    remote_ip_prefix: str


def canonical_protocol(value, ethertype: str) -> str:
    """Protocol name or number → canonical text ("" for any). Raises `RuleError`."""
    if value is None:
        return ""
    text = str(value).strip().lower()
    text = _ALIASES.get(text, text)
    if text.isdigit():
        number = int(text)
        if not 0 <= number <= 255:
            raise RuleError(f"Protocol number {number} is outside 0-255.", field="protocol")
        text = _NAMES_BY_NUMBER.get(number, str(number))
    elif text and text not in PROTOCOL_NUMBERS:
        raise RuleError(f"Unknown protocol {value!r}.", field="protocol")
    if text == "icmp" and ethertype == "IPv6":
        text = "ipv6-icmp"
    if text == "ipv6-icmp" and ethertype == "IPv4":
        raise RuleError("ipv6-icmp needs ethertype IPv6.", field="protocol")
    return text


def _ports(protocol: str | None, low, high) -> tuple[int | None, int | None]:
    """`protocol` None: it was invalid (reported), so only the ports' own checks run."""
    if low is None and high is None:
        return None, None
    if protocol is not None and protocol not in PORT_PROTOCOLS:
        raise RuleError(f"Ports apply only to {', '.join(sorted(PORT_PROTOCOLS))}: leave them empty for this protocol.",
                        field="port_range_min")
    low = high if low is None else low
    high = low if high is None else high
    bad = [RuleError(f"{_PORT_WORDS[name]} must be a port from 1 to 65535.", field=name)
           for name, value in (("port_range_min", low), ("port_range_max", high)) if not 1 <= int(value) <= 65535]
    if bad:
        raise RuleErrors(bad)
    if low > high:
        raise RuleError("The first port must not be greater than the last port.", field="port_range_min")
    if (low, high) == (1, 65535):
        return None, None
    return int(low), int(high)


def _icmp(protocol: str | None, icmp_type, icmp_code) -> tuple[int | None, int | None]:
    if icmp_type is None and icmp_code is None:
        return None, None
    if protocol is not None and protocol not in ICMP_PROTOCOLS:
        raise RuleError("An ICMP type and code apply only to the icmp and ipv6-icmp protocols.", field="icmp_type")
    bad = [RuleError(f"The ICMP {name.removeprefix('icmp_')} must be from 0 to 255.", field=name)
           for name, value in (("icmp_type", icmp_type), ("icmp_code", icmp_code))
           if value is not None and not 0 <= int(value) <= 255]
    if icmp_type is None:
        bad.insert(0, RuleError("An ICMP code needs an ICMP type.", field="icmp_code"))
    if bad:
        raise RuleErrors(bad)
    return int(icmp_type), (None if icmp_code is None else int(icmp_code))


def _prefix(text: str | None, ethertype: str | None) -> str:
    if not text:
        return ""
    raw = str(text).strip()
    try:
        net = ipaddress.ip_network(raw, strict=False)
    except ValueError:
        raise RuleError(f"{text!r} is not an IP prefix.", field="remote_ip_prefix")
    if ethertype is not None and f"IPv{net.version}" != ethertype:
        raise RuleError(f"The remote prefix {raw} is not an {ethertype} prefix (the rule's ethertype).",
                        field="remote_ip_prefix")
    return "" if net.prefixlen == 0 else str(net)


def canonicalize(*, direction: str, ethertype: str = "IPv4", protocol=None, port_range_min=None,
                 port_range_max=None, icmp_type=None, icmp_code=None, remote_ip_prefix: str | None = None,
                 has_remote_group: bool = False) -> CanonicalRule:
    """Validate one rule and return its canonical form. Every bad field is reported at once: raises `RuleErrors`
    (each a `RuleError` with its field and code, in field order). A check that needs another field (ports need
    the protocol, the prefix's family the ethertype) is left out while that field is itself wrong."""
    found: list[RuleError] = []

    def check(fn, *args):
        try:
            return fn(*args)
        except RuleErrors as exc:
            found.extend(exc.errors)
        except RuleError as exc:
            found.append(exc)
        return None

    if direction not in ("ingress", "egress"):
        found.append(RuleError("The direction must be ingress or egress.", field="direction"))
    if ethertype not in ("IPv4", "IPv6"):
        found.append(RuleError("The ethertype must be IPv4 or IPv6.", field="ethertype"))
    known_ethertype = ethertype if ethertype in ("IPv4", "IPv6") else None
    proto = check(canonical_protocol, protocol, known_ethertype)
    low, high = check(_ports, proto, port_range_min, port_range_max) or (None, None)
    itype, icode = check(_icmp, proto, icmp_type, icmp_code) or (None, None)
    prefix = check(_prefix, remote_ip_prefix, known_ethertype)
    if remote_ip_prefix and has_remote_group:
        found.append(RuleError("Give a remote prefix or a remote group, not both.", field="remote_group"))
    if found:
        raise RuleErrors(found)
    return CanonicalRule(direction, ethertype, proto, low, high, itype, icode, prefix)


def ovn_match(rule: CanonicalRule, *, port_group: str, remote_group_pg: str | None) -> str:
    """The OVN ACL match of a rule on port group `port_group` (OVN `ovn-nb(5)` ACL match syntax).

    ingress → `outport == @pg`, remote is the source; egress → `inport == @pg`, remote is the destination."""
    ip = "ip4" if rule.ethertype == "IPv4" else "ip6"
    ingress = rule.direction == "ingress"
    parts = [f"outport == @{port_group}" if ingress else f"inport == @{port_group}", ip]
    side = "src" if ingress else "dst"
    if rule.remote_ip_prefix:
        parts.append(f"{ip}.{side} == {rule.remote_ip_prefix}")
    elif remote_group_pg:
        parts.append(f"{ip}.{side} == ${remote_group_pg}_{ip}")
    if rule.protocol in PORT_PROTOCOLS:
        parts.append(rule.protocol)
        if rule.port_range_min is not None:
            if rule.port_range_min == rule.port_range_max:
                parts.append(f"{rule.protocol}.dst == {rule.port_range_min}")
            else:
                parts.append(f"{rule.protocol}.dst >= {rule.port_range_min} && "
                             f"{rule.protocol}.dst <= {rule.port_range_max}")
    elif rule.protocol in ICMP_PROTOCOLS:
        icmp = "icmp4" if rule.ethertype == "IPv4" else "icmp6"
        parts.append(icmp)
        if rule.icmp_type is not None:
            parts.append(f"{icmp}.type == {rule.icmp_type}")
        if rule.icmp_code is not None:
            parts.append(f"{icmp}.code == {rule.icmp_code}")
    elif rule.protocol:
        number = PROTOCOL_NUMBERS.get(rule.protocol, rule.protocol)
        parts.append(f"ip.proto == {number}")
    return " && ".join(parts)
