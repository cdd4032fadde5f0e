"""Public IPs from operator pools, NATed on the VPC's router (OVN `dnat_and_snat`)."""
from __future__ import annotations

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.db import unique_conflict
from apps.core.errors import Conflict, ValidationFailed
from apps.tenancy.quotas import quota_check

from .. import ipam
from ..errors import Code
from ..models import Port, PublicIp, PublicIpHolding, PublicIpPool, Vpc
from ..states import PublicIpKind
from ._common import authorize_operator, authorize_write, fields_of, input_errors, schedule_ovn_reconcile


def public_ip_pool_create(*, actor, name: str, cidr: str, first_ip: str, last_ip: str, gateway_ip: str,
                          network_name: str = "physnet-public", description: str = "") -> PublicIpPool:
    """Operator: an external IPv4 range `first_ip`..`last_ip` inside `cidr`, upstream router `gateway_ip`
    (outside the range). 400 for addresses outside the CIDR; 409 `name_taken`."""
    authorize_operator(actor)
    with input_errors():
        net = ipam.parse_network(cidr, field="cidr")
        first = ipam.parse_address(first_ip, field="first_ip")
        last = ipam.parse_address(last_ip, field="last_ip")
        gw = ipam.parse_address(gateway_ip, field="gateway_ip")
        for field, addr in (("first_ip", first), ("last_ip", last), ("gateway_ip", gw)):
            if addr not in net:
                raise ipam.AddressError(f"{addr} is not in {net}.", field=field)
        if first > last:
            raise ipam.AddressError("first_ip must not be after last_ip.", field="first_ip")
        if first <= gw <= last:
            raise ipam.AddressError("gateway_ip must be outside the allocation range.", field="gateway_ip")
    with transaction.atomic():
        with unique_conflict(f"A pool named {name!r} exists.", code=Code.NAME_TAKEN):
            pool = PublicIpPool.objects.create(name=name, cidr=str(net), first_ip=str(first), last_ip=str(last),
                                               gateway_ip=str(gw), network_name=network_name,
                                               description=description)
        audit_record(actor=actor, action="networking.public_ip_pool.create", target=pool,
                     after=fields_of(pool, ("name", "cidr", "first_ip", "last_ip")))
    return pool


def _take_address(pool: PublicIpPool) -> str:
    taken = {ipam.parse_address(a, field="pool") for a in pool.addresses.values_list("address", flat=True)}
    addr = ipam.next_free(ipam.parse_address(pool.first_ip, field="pool"),
                          ipam.parse_address(pool.last_ip, field="pool"), taken)
    if addr is None:
        raise Conflict(f"Public IP pool {pool.name!r} is exhausted.", code=Code.PUBLIC_IP_POOL_EXHAUSTED)
    return str(addr)


def public_ip_create(*, actor, vpc: Vpc, pool: PublicIpPool, port: Port | None = None) -> PublicIp:
    """Allocate a floating IP for `vpc` from `pool`, optionally NATed to `port` at once.

    The VPC's router takes one more address of the pool as its external (SNAT) address with its first floating
    IP. 422 past the `public_ips` quota; 409 `public_ip_pool_exhausted`; all routers of one VPC use one pool."""
    authorize_write(actor, vpc.project)
    with transaction.atomic():
        quota_check(scope=vpc.project, resource="public_ips", requested=1)
        pool = PublicIpPool.objects.select_for_update().get(pk=pool.pk)
        gateway = PublicIp.objects.filter(vpc=vpc, kind=PublicIpKind.ROUTER_GATEWAY).first()
        if gateway is not None and gateway.pool_id != pool.pk:
            raise ValidationFailed(f"This VPC's router uses pool {gateway.pool.name!r}.", code="wrong_pool",
                                   errors={"pool": ["use the VPC's pool"]})
        if gateway is None:
            PublicIp.objects.create(project=vpc.project, pool=pool, vpc=vpc, kind=PublicIpKind.ROUTER_GATEWAY,
                                    address=_take_address(pool))
        pip = PublicIp.objects.create(project=vpc.project, pool=pool, vpc=vpc, kind=PublicIpKind.FLOATING,
                                      address=_take_address(pool))
        if port is not None:
            _associate(pip, port)
        PublicIpHolding.objects.create(project=vpc.project, public_ip_id=pip.pk, address=pip.address,
                                       pool_name=pool.name, start=now())
        audit_record(actor=actor, action="networking.public_ip.create", target=pip,
                     after={"address": pip.address, "port": str(pip.port_id or "")})
        schedule_ovn_reconcile()
    return pip


def _associate(pip: PublicIp, port: Port) -> None:
    if port.vpc_id != pip.vpc_id:
        raise ValidationFailed("The port is not in the public IP's VPC.", code="wrong_vpc",
                               errors={"port": ["not in this VPC"]})
    if port.subnet.ip_version != 4:
        raise ValidationFailed("Floating IPs NAT to IPv4 ports only.", code="wrong_ip_version",
                               errors={"port": ["IPv4 port required"]})
    if PublicIp.objects.filter(port=port).exclude(pk=pip.pk).exists():
        raise Conflict("The port already has a public IP.", code=Code.IN_USE)
    pip.port = port
    pip.save(update_fields=["port"])


def public_ip_associate(*, actor, public_ip: PublicIp, port: Port | None) -> PublicIp:
    """NAT `public_ip` to `port` (same VPC, IPv4), or remove the NAT with `port=None`."""
    authorize_write(actor, public_ip.project)
    if public_ip.kind != PublicIpKind.FLOATING:
        raise Conflict("The router's address cannot be moved.", code=Code.IN_USE)
    with transaction.atomic():
        before = {"port": str(public_ip.port_id or "")}
        if port is None:
            public_ip.port = None
            public_ip.save(update_fields=["port"])
        else:
            _associate(public_ip, port)
        audit_record(actor=actor, action="networking.public_ip.associate", target=public_ip,
                     before=before, after={"port": str(public_ip.port_id or "")})
        schedule_ovn_reconcile()
    return public_ip


def public_ip_delete(*, actor, public_ip: PublicIp) -> None:
    """Release a floating IP (its NAT goes at the next reconcile). The router's address goes with the VPC."""
    authorize_write(actor, public_ip.project)
    if public_ip.kind != PublicIpKind.FLOATING:
        raise Conflict("The router's address is released when the VPC is deleted.", code=Code.IN_USE)
    with transaction.atomic():
        audit_record(actor=actor, action="networking.public_ip.delete", target=public_ip,
                     before={"address": public_ip.address})
        PublicIpHolding.objects.filter(public_ip_id=public_ip.pk, end__isnull=True).update(end=now())
        public_ip.delete()
        schedule_ovn_reconcile()
