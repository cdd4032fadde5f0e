"""Security groups and rules (validation in `apps.networking.sg_rules`, RW-048)."""
from __future__ import annotations

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.db import unique_conflict
from apps.core.errors import Conflict, ValidationFailed

from .. import sg_rules
from ..errors import Code
from ..models import SecurityGroup, SecurityGroupRule, Vpc
from ._common import authorize_write, fields_of, input_errors, schedule_ovn_reconcile

RULE_FIELDS = ("direction", "ethertype", "protocol", "port_range_min", "port_range_max", "icmp_type", "icmp_code",
               "remote_ip_prefix", "remote_group_id")


# The rules every new group starts with: all IPv4 and all IPv6 egress, to anywhere (OpenStack Neutron's
# `create_security_group` in `neutron/db/securitygroups_db.py` adds one such egress rule per ethertype). They are
# ordinary rules afterwards: the tenant may delete them.
DEFAULT_EGRESS_RULES = ({"direction": "egress", "ethertype": "IPv4"}, {"direction": "egress", "ethertype": "IPv6"})


def security_group_create(*, actor, vpc: Vpc, name: str, description: str = "",
                          rules: list[dict] | None = None) -> SecurityGroup:
    """A new group in `vpc`: the default egress rules (`DEFAULT_EGRESS_RULES`: IPv4 and IPv6, any protocol, to
    anywhere) plus `rules` (each as for `security_group_rule_create`; one equal to a default rule is that rule,
    not a 409). Ingress is closed until a rule opens it. 409 `name_taken`; 400 `invalid_security_group_rule`
    (nothing written)."""
    authorize_write(actor, vpc.project)
    with transaction.atomic():
        with unique_conflict(f"A security group named {name!r} exists in this VPC.", code=Code.NAME_TAKEN):
            sg = SecurityGroup.objects.create(project=vpc.project, vpc=vpc, name=name, description=description)
        audit_record(actor=actor, action="networking.security_group.create", target=sg,
                     after=fields_of(sg, ("name", "description")))
        defaults = [_rule_insert(actor, sg, **spec, description="default egress") for spec in DEFAULT_EGRESS_RULES]
        for spec in rules or []:
            _rule_insert(actor, sg, **spec, same_as_ok=defaults)
        schedule_ovn_reconcile()
    return sg


def security_group_delete(*, actor, security_group: SecurityGroup) -> None:
    """Delete a group: 409 `in_use` for the default group, a group with ports, or one another rule refers to."""
    authorize_write(actor, security_group.project)
    with transaction.atomic():
        if security_group.is_default:
            raise Conflict("The VPC's default security group is deleted with the VPC.", code=Code.IN_USE)
        if security_group.ports.exists():
            raise Conflict("Ports still use this security group.", code=Code.IN_USE)
        if security_group.referencing_rules.exclude(security_group=security_group).exists():
            raise Conflict("A rule of another group refers to this group.", code=Code.IN_USE)
        security_group.rules.all().delete()
        audit_record(actor=actor, action="networking.security_group.delete", target=security_group,
                     before=fields_of(security_group, ("name",)))
        security_group.delete()
        schedule_ovn_reconcile()


def security_group_rule_create(*, actor, security_group: SecurityGroup, direction: str, ethertype: str = "IPv4",
                               protocol=None, port_range_min: int | None = None, port_range_max: int | None = None,
                               icmp_type: int | None = None, icmp_code: int | None = None,
                               remote_ip_prefix: str | None = None, remote_group: SecurityGroup | None = None,
                               description: str = "") -> SecurityGroupRule:
    """Add one allow rule, stored canonically (tcp 1-65535 → all ports; a bare address → /32 or /128; icmp with
    IPv6 → ipv6-icmp; "any" → no protocol). 400 `invalid_security_group_rule` naming the field for port 0,
    reversed ranges, ports on port-less protocols, ICMP type/code outside 0-255 or a code without type, a
    prefix of the other family, a prefix together with a group; 409 `duplicate_rule` for an existing rule."""
    authorize_write(actor, security_group.project)
    with transaction.atomic():
        rule = _rule_insert(actor, security_group, direction=direction, ethertype=ethertype, protocol=protocol,
                            port_range_min=port_range_min, port_range_max=port_range_max, icmp_type=icmp_type,
                            icmp_code=icmp_code, remote_ip_prefix=remote_ip_prefix, remote_group=remote_group,
                            description=description)
        schedule_ovn_reconcile()
    return rule


def _rule_insert(actor, sg: SecurityGroup, *, direction: str, ethertype: str = "IPv4", protocol=None,
                 port_range_min=None, port_range_max=None, icmp_type=None, icmp_code=None,
                 remote_ip_prefix=None, remote_group: SecurityGroup | None = None,
                 description: str = "", same_as_ok: list[SecurityGroupRule] = ()) -> SecurityGroupRule:
    with input_errors():
        canon = sg_rules.canonicalize(direction=direction, ethertype=ethertype, protocol=protocol,
                                      port_range_min=port_range_min, port_range_max=port_range_max,
                                      icmp_type=icmp_type, icmp_code=icmp_code, remote_ip_prefix=remote_ip_prefix,
                                      has_remote_group=remote_group is not None)
    if remote_group is not None and remote_group.vpc_id != sg.vpc_id:
        raise ValidationFailed("remote_group must be a security group of the same VPC.",
                               code="invalid_security_group_rule",
                               errors={"remote_group": ["not a group of this VPC"]})
    values = {"direction": canon.direction, "ethertype": canon.ethertype, "protocol": canon.protocol,
              "port_range_min": canon.port_range_min, "port_range_max": canon.port_range_max,
              "icmp_type": canon.icmp_type, "icmp_code": canon.icmp_code,
              "remote_ip_prefix": canon.remote_ip_prefix, "remote_group": remote_group}
    existing = sg.rules.filter(**values).first()
    if existing is not None and existing in same_as_ok:
        return existing
    if existing is not None:
        raise Conflict("The same rule exists in this group.", code="duplicate_rule")
    rule = SecurityGroupRule.objects.create(project=sg.project, security_group=sg, description=description,
                                            **values)
    audit_record(actor=actor, action="networking.security_group_rule.create", target=rule,
                 after=fields_of(rule, RULE_FIELDS))
    return rule


def security_group_rule_delete(*, actor, rule: SecurityGroupRule) -> None:
    authorize_write(actor, rule.project)
    with transaction.atomic():
        audit_record(actor=actor, action="networking.security_group_rule.delete", target=rule,
                     before=fields_of(rule, RULE_FIELDS))
        rule.delete()
        schedule_ovn_reconcile()
