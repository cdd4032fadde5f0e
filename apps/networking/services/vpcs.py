"""VPC and subnet writes (IPAM rules in `apps.networking.ipam`)."""
from __future__ import annotations

from django.conf import settings
from django.db import transaction

from apps.audit.services import audit_record
from apps.core.db import atomic_with_retry, unique_conflict
from apps.core.errors import Conflict
from apps.tenancy.quotas import quota_check

from .. import ipam
from ..errors import Code
from ..models import PublicIp, SecurityGroup, SecurityGroupRule, Subnet, Vpc
from ._common import authorize_write, fields_of, input_errors, schedule_ovn_reconcile

VPC_FIELDS = ("name", "cidr", "ipv6_cidr", "description")
SUBNET_FIELDS = ("name", "cidr", "ip_version", "gateway_ip", "dhcp_start", "dhcp_end", "dns_nameservers")


def _allowed_extra() -> list[str]:
    return list(getattr(settings, "NETWORKING_ALLOWED_VPC_CIDRS", []))


def vpc_cidr_check(text: str, *, field: str) -> ipam.IPNetwork:
    """Parse and check one VPC CIDR without the database: `field` "cidr" takes an IPv4 range, "ipv6_cidr" an IPv6
    one; inside RFC 1918 / RFC 4193 or `settings.NETWORKING_ALLOWED_VPC_CIDRS`, /8../29 (IPv4) or /32../124
    (IPv6). Raises `ipam.AddressError` (`invalid_cidr`, `vpc_cidr_not_allowed`, `vpc_cidr_too_large`,
    `vpc_cidr_too_small`). The create's input serializer runs it too, so a bad CIDR is named beside a bad name."""
    net = ipam.parse_network(text, field=field)
    if field == "cidr" and net.version != 4:
        raise ipam.AddressError("The CIDR must be an IPv4 range; an IPv6 range goes in the IPv6 CIDR.",
                                field=field, code="invalid_cidr")
    if field == "ipv6_cidr" and net.version != 6:
        raise ipam.AddressError("The IPv6 CIDR must be an IPv6 range.", field=field, code="invalid_cidr")
    ipam.check_vpc_cidr(net, _allowed_extra(), field=field)
    return net


def _vpc_cidrs(cidr: str, ipv6_cidr: str) -> tuple[ipam.IPNetwork, ipam.IPNetwork | None]:
    """Both CIDRs checked; `ipam.AddressErrors` naming each bad one."""
    nets, bad = {}, []
    for field, text in (("cidr", cidr), ("ipv6_cidr", ipv6_cidr)):
        if text or field == "cidr":
            try:
                nets[field] = vpc_cidr_check(text, field=field)
            except ipam.AddressError as exc:
                bad.append(exc)
    if bad:
        raise ipam.AddressErrors(bad)
    return nets["cidr"], nets.get("ipv6_cidr")


@atomic_with_retry
def vpc_create(*, actor, project, name: str, cidr: str, ipv6_cidr: str = "", description: str = "") -> Vpc:
    """Create a VPC and its default security group (egress anywhere + ingress from the same group).

    `cidr`: IPv4, inside RFC 1918 or `settings.NETWORKING_ALLOWED_VPC_CIDRS` (400 `vpc_cidr_not_allowed`);
    `ipv6_cidr` optional, inside fc00::/7 or allowed. Other projects may use the same CIDR. 422 past the `vpcs`
    quota; 409 `name_taken`. Both CIDRs are checked before answering (`vpc_cidr_check`): one 400 names each bad
    one (its `code` the one they share, else `validation_error`)."""
    authorize_write(actor, project)
    with input_errors():
        net4, net6 = _vpc_cidrs(cidr, ipv6_cidr)
    with transaction.atomic():
        quota_check(scope=project, resource="vpcs", requested=1)
        with unique_conflict(f"A VPC named {name!r} exists in this project.", code=Code.NAME_TAKEN):
            vpc = Vpc.objects.create(project=project, name=name, cidr=str(net4),
                                     ipv6_cidr=str(net6) if net6 else "", description=description)
        _default_security_group(vpc)
        audit_record(actor=actor, action="networking.vpc.create", target=vpc, after=fields_of(vpc, VPC_FIELDS))
        schedule_ovn_reconcile()
    return vpc


def _default_security_group(vpc: Vpc) -> SecurityGroup:
    sg = SecurityGroup.objects.create(project=vpc.project, vpc=vpc, name="default", is_default=True,
                                      description="Egress anywhere; ingress from members of this group")
    rules = [SecurityGroupRule(project=vpc.project, security_group=sg, direction="egress", ethertype="IPv4"),
             SecurityGroupRule(project=vpc.project, security_group=sg, direction="ingress", ethertype="IPv4",
                               remote_group=sg)]
    if vpc.ipv6_cidr:
        rules += [SecurityGroupRule(project=vpc.project, security_group=sg, direction="egress", ethertype="IPv6"),
                  SecurityGroupRule(project=vpc.project, security_group=sg, direction="ingress",
                                    ethertype="IPv6", remote_group=sg)]
    SecurityGroupRule.objects.bulk_create(rules)
    return sg


def vpc_update(*, actor, vpc: Vpc, description: str | None = None) -> Vpc:
    """Change the description (CIDRs are fixed after creation)."""
    authorize_write(actor, vpc.project)
    with transaction.atomic():
        before = fields_of(vpc, ("description",))
        if description is not None:
            vpc.description = description
            vpc.save(update_fields=["description"])
        audit_record(actor=actor, action="networking.vpc.update", target=vpc,
                     before=before, after=fields_of(vpc, ("description",)))
    return vpc


def vpc_delete(*, actor, vpc: Vpc) -> None:
    """Delete an empty VPC (409 `in_use` while it has subnets or floating IPs); frees its router address."""
    authorize_write(actor, vpc.project)
    with transaction.atomic():
        vpc = Vpc.objects.select_for_update().get(pk=vpc.pk)
        if vpc.subnets.exists() or vpc.public_ips.filter(kind="floating").exists():
            raise Conflict("Delete the VPC's subnets and floating IPs first.", code=Code.IN_USE)
        PublicIp.objects.filter(vpc=vpc, kind="router_gateway").delete()
        rules = SecurityGroupRule.objects.filter(security_group__vpc=vpc)
        if SecurityGroupRule.objects.filter(remote_group__vpc=vpc).exclude(pk__in=rules).exists():
            raise Conflict("Another group's rule refers to a group of this VPC.", code=Code.IN_USE)
        rules.delete()
        vpc.security_groups.all().delete()
        audit_record(actor=actor, action="networking.vpc.delete", target=vpc, before=fields_of(vpc, VPC_FIELDS))
        vpc.delete()
        schedule_ovn_reconcile()


def subnet_create(*, actor, vpc: Vpc, name: str, cidr: str, gateway_ip: str | None = None,
                  dhcp_start: str | None = None, dhcp_end: str | None = None, enable_dhcp: bool = True,
                  dns_nameservers: list[str] | None = None) -> Subnet:
    """Add a subnet (IPv4 or IPv6 by its CIDR) inside the VPC's CIDR of that family.

    400 `subnet_overlap` when it overlaps another subnet of the VPC (naming it), `subnet_outside_vpc`,
    `subnet_too_small`, `invalid_address` for a gateway or DHCP range outside the subnet."""
    authorize_write(actor, vpc.project)
    with transaction.atomic():
        vpc = Vpc.objects.select_for_update().get(pk=vpc.pk)
        with input_errors():
            net = ipam.parse_network(cidr, field="cidr")
            vpc_net = ipam.parse_network(vpc.cidr if net.version == 4 else vpc.ipv6_cidr, field="cidr") \
                if (net.version == 4 or vpc.ipv6_cidr) else None
            siblings = {s.name: ipam.parse_network(s.cidr, field="cidr") for s in vpc.subnets.all()}
            ipam.check_subnet_fits(net, vpc_cidr=vpc_net, siblings=siblings)
            plan = ipam.plan_subnet(net, gateway=gateway_ip, dhcp_start=dhcp_start, dhcp_end=dhcp_end)
            dns = [str(ipam.parse_address(a, field="dns_nameservers")) for a in (dns_nameservers or [])]
        with unique_conflict(f"A subnet named {name!r} exists in this VPC.", code=Code.NAME_TAKEN):
            subnet = Subnet.objects.create(
                project=vpc.project, vpc=vpc, name=name, cidr=str(net), ip_version=net.version,
                gateway_ip=str(plan.gateway), dhcp_start=str(plan.dhcp_start), dhcp_end=str(plan.dhcp_end),
                enable_dhcp=enable_dhcp, dns_nameservers=dns)
        audit_record(actor=actor, action="networking.subnet.create", target=subnet,
                     after=fields_of(subnet, SUBNET_FIELDS))
        schedule_ovn_reconcile()
    return subnet


def subnet_delete(*, actor, subnet: Subnet) -> None:
    """Delete a subnet without ports (409 `in_use` otherwise)."""
    authorize_write(actor, subnet.project)
    with transaction.atomic():
        if subnet.ports.exists():
            raise Conflict("The subnet still has ports.", code=Code.IN_USE)
        audit_record(actor=actor, action="networking.subnet.delete", target=subnet,
                     before=fields_of(subnet, SUBNET_FIELDS))
        subnet.delete()
        schedule_ovn_reconcile()
