"""Ports (virtual NICs): MAC, fixed IPs from the subnet's IPAM, security groups, bound instance.

Compute calls `port_create_for_instance` when it places an instance and `ports_delete_for_instance` when it
deletes one; both are ordinary services (authorization, audit, reconcile after commit).
"""
from __future__ import annotations

import secrets
import uuid

from django.conf import settings
from django.db import IntegrityError, transaction

from apps.audit.services import audit_record
from apps.core.db import advisory_xact_lock
from apps.core.errors import Conflict, ValidationFailed
from apps.tenancy.errors import Forbidden

from .. import conf, ipam
from ..errors import Code
from ..models import IpAllocation, Port, PublicIp, SecurityGroup, Subnet
from ._common import authorize_write, input_errors, schedule_ovn_reconcile

MAC_PREFIX_DEFAULT = "0a:58"


def _mac_prefix() -> str:
    return getattr(settings, "NETWORKING_MAC_PREFIX", MAC_PREFIX_DEFAULT)


def _port_after(port: Port) -> dict:
    return {"subnet": str(port.subnet_id), "mac_address": port.mac_address, "instance_id": port.instance_id,
            "fixed_ips": [a.address for a in port.fixed_ips.all()],
            "security_groups": sorted(str(g) for g in port.security_groups.values_list("id", flat=True)),
            "allowed_address_pairs": list(port.allowed_address_pairs)}


def _allocate(subnet: Subnet, requested: list[str]) -> list[str]:
    """Addresses for a new port: the requested ones (checked) or the lowest free one of the DHCP range."""
    cidr = ipam.parse_network(subnet.cidr, field="subnet")
    gateway = ipam.parse_address(subnet.gateway_ip, field="subnet")
    taken = {ipam.parse_address(a, field="subnet")
             for a in IpAllocation.objects.filter(subnet=subnet).values_list("address", flat=True)}
    if requested:
        out = []
        for text in requested:
            addr = ipam.parse_address(text, field="ip_addresses")
            ipam.check_fixed_ip(addr, cidr=cidr, gateway=gateway)
            if addr in taken or str(addr) in out:
                raise Conflict(f"{addr} is already in use in subnet {subnet.name!r}.", code=Code.IP_IN_USE)
            out.append(str(addr))
        return out
    start = ipam.parse_address(subnet.dhcp_start, field="subnet")
    end = ipam.parse_address(subnet.dhcp_end, field="subnet")
    addr = ipam.next_free(start, end, taken)
    if addr is None:
        raise Conflict(f"Subnet {subnet.name!r} has no free address.", code=Code.SUBNET_EXHAUSTED)
    return [str(addr)]


def _address_pairs(actor, subnet: Subnet, pairs: list[str]) -> list[str]:
    from apps.tenancy.selectors import is_staff

    gateway = ipam.parse_address(subnet.gateway_ip, field="subnet")
    staff = actor is None or is_staff(actor)
    try:
        nets = [ipam.check_allowed_address_pair(p, subnet_gateway=gateway, staff=staff) for p in pairs]
    except ipam.AddressError as exc:
        if exc.code == "catch_all_address_pair":
            raise Forbidden(str(exc), code=exc.code)
        raise
    return sorted({str(n) for n in nets}, key=lambda t: (":" in t, t))


def port_create(*, actor, subnet: Subnet, name: str = "", ip_addresses: list[str] | None = None,
                security_groups: list[SecurityGroup] | None = None, mac_address: str | None = None,
                instance_id: uuid.UUID | None = None, allowed_address_pairs: list[str] | None = None) -> Port:
    """A port in `subnet` with fixed IPs (`ip_addresses`, else the lowest free address of the DHCP range) and
    security groups of the same VPC (default: the VPC's default group). 409 `ip_in_use`, `subnet_exhausted`;
    `allowed_address_pairs` as in `ipam.check_allowed_address_pair` (400 / 403 `catch_all_address_pair`)."""
    authorize_write(actor, subnet.project)
    groups = list(security_groups) if security_groups is not None else None
    if groups and any(g.vpc_id != subnet.vpc_id for g in groups):
        raise ValidationFailed("Security groups must belong to the port's VPC.", code="invalid_security_group",
                               errors={"security_groups": ["not in this VPC"]})
    with transaction.atomic():
        subnet = Subnet.objects.select_for_update().get(pk=subnet.pk)   # serialize IPAM per subnet
        with input_errors():
            addresses = _allocate(subnet, list(ip_addresses or []))
            mac = ipam.canonical_mac(mac_address) if mac_address else None
            pairs = _address_pairs(actor, subnet, list(allowed_address_pairs or []))
        port = _insert_port(subnet, name, mac, instance_id)
        if pairs:
            port.allowed_address_pairs = pairs
            port.save(update_fields=["allowed_address_pairs"])
        IpAllocation.objects.bulk_create([IpAllocation(project=subnet.project, port=port, subnet=subnet, address=a)
                                          for a in addresses])
        if groups is None:
            groups = list(SecurityGroup.objects.filter(vpc_id=subnet.vpc_id, is_default=True))
        port.security_groups.set(groups)
        audit_record(actor=actor, action="networking.port.create", target=port, after=_port_after(port))
        schedule_ovn_reconcile()
    return port


def _insert_port(subnet: Subnet, name: str, mac: str | None, instance_id) -> Port:
    for _ in range(5):
        candidate = mac or ipam.random_mac(_mac_prefix(), secrets.randbits(48))
        try:
            with transaction.atomic():
                return Port.objects.create(project=subnet.project, vpc_id=subnet.vpc_id, subnet=subnet, name=name,
                                           mac_address=candidate, instance_id=instance_id)
        except IntegrityError:
            if mac:
                raise Conflict(f"MAC {mac} is in use.", code="mac_in_use")
    raise Conflict("Could not find a free MAC address.", code="mac_in_use")


def port_create_for_instance(*, actor, subnet: Subnet, instance_id: uuid.UUID, name: str = "",
                             ip_addresses: list[str] | None = None,
                             security_groups: list[SecurityGroup] | None = None) -> Port:
    """For compute: the NIC of instance `instance_id` in `subnet` (same rules as `port_create`)."""
    return port_create(actor=actor, subnet=subnet, name=name, ip_addresses=ip_addresses,
                       security_groups=security_groups, instance_id=instance_id)


def _subnet_vlan(subnet: Subnet) -> int:
    """The subnet's bare-metal VLAN id, given on first use: the lowest free id of `conf.baremetal_vlans()` (the
    subnet row is locked by the caller, the choice serialized by a transaction advisory lock). 409 `vlan_exhausted`."""
    if subnet.baremetal_vlan is not None:
        return subnet.baremetal_vlan
    first, last = conf.baremetal_vlans()
    advisory_xact_lock("networking:baremetal_vlan")  # two subnets' first joins at once: both the lowest free id
    used = set(Subnet.objects.filter(baremetal_vlan__isnull=False).values_list("baremetal_vlan", flat=True))
    vlan = next((v for v in range(first, last + 1) if v not in used), None)
    if vlan is None:
        raise Conflict(f"No free bare-metal VLAN id in {first}-{last}.", code="vlan_exhausted")
    Subnet.objects.filter(pk=subnet.pk).update(baremetal_vlan=vlan)
    subnet.baremetal_vlan = vlan
    return vlan


def port_create_for_baremetal(*, actor, subnet: Subnet, instance_id: uuid.UUID, mac_address: str,
                              physical_network: str, name: str = "") -> Port:
    """For bare metal: the server's physical NIC (`mac_address`) joins `subnet` on `physical_network`: a port with
    that MAC and a fixed IP from the subnet's IPAM (no security groups: OVN's ACLs never see a physical server's
    traffic, ADR 1212), and the subnet gets its VLAN id (`_subnet_vlan`), the tag of its localnet port on that
    physical network (`desired.ovn_topology`). 409 `mac_in_use`, `subnet_exhausted`, `vlan_exhausted`."""
    with transaction.atomic():
        locked = Subnet.objects.select_for_update().get(pk=subnet.pk)
        _subnet_vlan(locked)
        port = port_create(actor=actor, subnet=locked, name=name, security_groups=[], mac_address=mac_address,
                           instance_id=instance_id)
        Port.objects.filter(pk=port.pk).update(physical_network=physical_network)
        port.physical_network = physical_network
    return port


def port_update(*, actor, port: Port, name: str | None = None, security_groups: list[SecurityGroup] | None = None,
                allowed_address_pairs: list[str] | None = None) -> Port:
    """Rename a port, replace its security groups (same VPC) or its allowed-address pairs."""
    authorize_write(actor, port.project)
    if allowed_address_pairs is not None:
        with input_errors():
            pairs = _address_pairs(actor, port.subnet, list(allowed_address_pairs))
    if security_groups is not None and any(g.vpc_id != port.vpc_id for g in security_groups):
        raise ValidationFailed("Security groups must belong to the port's VPC.", code="invalid_security_group",
                               errors={"security_groups": ["not in this VPC"]})
    with transaction.atomic():
        before = _port_after(port)
        if name is not None:
            port.name = name
            port.save(update_fields=["name"])
        if security_groups is not None:
            port.security_groups.set(security_groups)
        if allowed_address_pairs is not None:
            port.allowed_address_pairs = pairs
            port.save(update_fields=["allowed_address_pairs"])
        audit_record(actor=actor, action="networking.port.update", target=port, before=before, after=_port_after(port))
        schedule_ovn_reconcile()
    return port


def port_delete(*, actor, port: Port) -> None:
    """Delete a port and free its addresses; a floating IP on it is disassociated (kept by the project)."""
    authorize_write(actor, port.project)
    with transaction.atomic():
        before = _port_after(port)
        PublicIp.objects.filter(port=port).update(port=None)
        audit_record(actor=actor, action="networking.port.delete", target=port, before=before)
        port.delete()
        schedule_ovn_reconcile()


def ports_delete_for_instance(*, actor, instance_id: uuid.UUID) -> int:
    """For compute: delete every port bound to `instance_id` (system actor or the instance's project writer).
    Returns how many were deleted; 0 is fine (idempotent)."""
    count = 0
    for port in Port.objects.filter(instance_id=instance_id).select_related("project"):
        port_delete(actor=actor, port=port)
        count += 1
    return count
