"""Outbound HTTP to addresses a tenant chose (webhooks): refuse internal destinations, pin the checked address.

A tenant-supplied URL must never make the control plane talk to itself or its network (SSRF): loopback,
link-local (the cloud metadata service at 169.254.169.254), private (RFC 1918, RFC 4193), shared (RFC 6598),
multicast, reserved and unspecified addresses are refused, and so is the deprecated IPv6 site-local range
fec0::/10 (RFC 3879), which `ipaddress` calls global but networks still route internally. An IPv6 address that
embeds an IPv4 one (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible ::a.b.c.d, 6to4 2002::/16 per RFC 3056, Teredo
2001::/32 per RFC 4380: server and client) is refused when the embedded address is; refused as well is any scheme but http/https and any port not in
`WEBHOOK_ALLOWED_PORTS` (default 80, 443). An operator may open specific networks with
`WEBHOOK_ALLOWED_NETWORKS` (CIDRs, e.g. an internal receiver), which also admits any port.

- `destination_check(url)` at registration: 400 `webhook_destination_refused` when the URL, or any address its
  host resolves to now, is refused. A name that does not resolve yet is accepted; delivery checks again.
- `guarded_post(url, ...)` at delivery: resolves the host, refuses (`DestinationRefused`, before any connection
  is opened) when any address is refused, then connects to the checked address itself, with the URL's host
  name kept for the `Host` header, TLS SNI and certificate verification, so a DNS answer that changes between
  the check and the connection (DNS rebinding) cannot redirect the request. Redirects are never followed.

Classification is the standard library's `ipaddress`; the pinning is a `requests` transport adapter.
"""
from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit, urlunsplit

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter

from .errors import ValidationFailed

DEFAULT_PORTS = {"http": 80, "https": 443}
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class DestinationRefused(ValidationFailed):
    """400 `webhook_destination_refused`: the URL points at a destination the control plane must not call."""

    code, title = "webhook_destination_refused", "Webhook destination refused"


def allowed_ports() -> set[int]:
    return {int(p) for p in getattr(settings, "WEBHOOK_ALLOWED_PORTS", (80, 443))}


def allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(n, strict=False) for n in getattr(settings, "WEBHOOK_ALLOWED_NETWORKS", ())]


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (stdlib resolver); [] when it does not resolve."""
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return []
    return list(dict.fromkeys(info[4][0] for info in infos))


def address_refused(address: Address) -> str:
    """Why `address` may not be called ('' when it may): internal, multicast, reserved or unspecified."""
    if any(address in net for net in allowed_networks()):
        return ""
    if isinstance(address, ipaddress.IPv6Address):
        if address.is_site_local:
            return "site-local"
        for embedded in _embedded_ipv4(address):
            why = address_refused(embedded)
            if why:
                return f"{why} (embeds {embedded})"
    for attr, why in (("is_loopback", "loopback"), ("is_link_local", "link-local"), ("is_multicast", "multicast"),
                      ("is_unspecified", "unspecified"), ("is_reserved", "reserved"), ("is_private", "private")):
        if getattr(address, attr):
            return why
    return "" if address.is_global else "not globally routable"


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses `address` carries: IPv4-mapped, IPv4-compatible (::a.b.c.d, not :: or ::1), 6to4,
    Teredo server and client; [] for none."""
    found = [address.ipv4_mapped, address.sixtofour, *(address.teredo or ())]
    if int(address) >> 32 == 0 and int(address) > 1:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return [a for a in found if a is not None]


def _parse(url: str) -> tuple[str, str, int]:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise DestinationRefused(f"Not a valid URL: {exc}.", errors={"url": ["not a valid URL"]}) from exc
    scheme, host = parts.scheme.lower(), (parts.hostname or "")
    if scheme not in DEFAULT_PORTS or not host:
        raise DestinationRefused("The URL must be http or https with a host.", errors={"url": ["http(s)://host/..."]})
    if parts.username or parts.password:
        raise DestinationRefused("The URL must not carry credentials.", errors={"url": ["no user:password@"]})
    return scheme, host, port or DEFAULT_PORTS[scheme]


def _refusal(host: str, port: int, addresses: list[str]) -> str:
    """Why a request to `host`:`port` at `addresses` is refused ('' when it is not). An address with no reason
    against it still needs an allowed port unless an allowed network holds it."""
    if not addresses:
        return "" if port in allowed_ports() else _port_message(port)
    for text in addresses:
        address = ipaddress.ip_address(text.split("%", 1)[0])
        why = address_refused(address)
        if why:
            return f"{address} is {why}" if text == host else f"{host} resolves to {address}, which is {why}"
        if port not in allowed_ports() and not any(address in net for net in allowed_networks()):
            return _port_message(port)
    return ""


def _port_message(port: int) -> str:
    return f"port {port} is not allowed (allowed: {', '.join(map(str, sorted(allowed_ports())))})"


def _literal(host: str) -> str:
    """The address `host` spells, '' for a name. Also the legacy IPv4 forms the C resolver accepts without asking
    DNS (`2130706433`, `0x7f.1`, `127.1`), so they are classified like the dotted quad they mean."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return str(ipaddress.IPv4Address(socket.inet_aton(host)))
    except (OSError, ValueError):
        return ""


def _checked(url: str) -> tuple[str, str, int, list[str]]:
    scheme, host, port = _parse(url)
    literal = _literal(host)
    addresses = [literal] if literal else resolve(host, port)
    why = _refusal(host, port, addresses)
    if why:
        raise DestinationRefused(f"This webhook destination is refused: {why}.", errors={"url": [why]})
    return scheme, host, port, addresses


def destination_check(url: str) -> None:
    """Refuse `url` (400 `webhook_destination_refused`, with `errors.url`) if it may not be called; see the module
    docstring. Resolves the host name (a name that does not resolve is accepted, delivery checks again)."""
    _checked(url)


class _PinnedAdapter(HTTPAdapter):
    """Connects to one checked address; TLS keeps verifying the certificate for the URL's host name."""

    def __init__(self, hostname: str, **kwargs):
        self._hostname = hostname
        super().__init__(**kwargs)

    def init_poolmanager(self, *args, **kwargs):
        kwargs["server_hostname"] = self._hostname
        kwargs["assert_hostname"] = self._hostname
        super().init_poolmanager(*args, **kwargs)


def guarded_post(url: str, *, data: bytes, headers: dict,
                 timeout: float | tuple[float, float]) -> requests.Response:
    """POST `data` to `url` after checking the resolved address (raises `DestinationRefused` before connecting),
    connected to that very address; redirects are not followed. `timeout`: seconds, or (connect, read) seconds."""
    scheme, host, port, addresses = _checked(url)
    if not addresses:
        raise DestinationRefused(f"{host} does not resolve.", errors={"url": ["host does not resolve"]})
    pinned = ipaddress.ip_address(addresses[0].split("%", 1)[0])
    netloc = f"[{pinned}]:{port}" if pinned.version == 6 else f"{pinned}:{port}"
    parts = urlsplit(url)
    target = urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))
    name = f"[{host}]" if ":" in host else host
    host_header = name if port == DEFAULT_PORTS[scheme] else f"{name}:{port}"
    with requests.Session() as session:
        session.trust_env = False  # no proxy from the environment: the checked address is the one connected to
        session.mount(f"{scheme}://", _PinnedAdapter(host))
        return session.post(target, data=data, headers={**headers, "Host": host_header}, timeout=timeout,
                            allow_redirects=False)
