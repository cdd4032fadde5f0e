"""Ethernet tenant networking: VPCs, subnets, security groups, ports, public IPs (and the operators' pools)."""
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from apps.core.models import ProjectOwned, TimestampedModel

from ..states import Direction, Ethertype, PublicIpKind


class Vpc(ProjectOwned):
    """A tenant network with one router. `cidr` is IPv4 (RFC 1918 or operator-allowed); `ipv6_cidr` optional.

    CIDRs may overlap other projects' VPCs: each VPC is its own OVN logical router and switches."""

    name = models.SlugField(max_length=63)
    description = models.CharField(max_length=200, blank=True)
    cidr = models.CharField(max_length=43, help_text="IPv4 CIDR, e.g. 10.0.0.0/16")
    ipv6_cidr = models.CharField(max_length=43, blank=True, help_text="IPv6 CIDR (RFC 4193), optional")

    class Meta:
        ordering = ["project", "name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="networking_vpc_name_uniq")]

    def __str__(self) -> str:
        return self.name


class Subnet(ProjectOwned):
    """An address range of a VPC (one OVN logical switch). IPAM: gateway, DHCP range, DNS servers."""

    vpc = models.ForeignKey(Vpc, on_delete=models.PROTECT, related_name="subnets")
    name = models.SlugField(max_length=63)
    cidr = models.CharField(max_length=43)
    ip_version = models.PositiveSmallIntegerField(choices=[(4, "IPv4"), (6, "IPv6")])
    gateway_ip = models.GenericIPAddressField()
    dhcp_start = models.GenericIPAddressField()
    dhcp_end = models.GenericIPAddressField()
    enable_dhcp = models.BooleanField(default=True)
    dns_nameservers = ArrayField(models.GenericIPAddressField(), default=list, blank=True)
    baremetal_vlan = models.PositiveSmallIntegerField(
        null=True, blank=True, unique=True,
        help_text="802.1Q VLAN id carrying the subnet on the bare-metal physical networks (set when the first "
                  "bare-metal server joins; the tag of the subnet's localnet ports)")

    class Meta:
        ordering = ["vpc", "name"]
        constraints = [models.UniqueConstraint(fields=["vpc", "name"], name="networking_subnet_name_uniq")]


class SecurityGroup(ProjectOwned):
    """Stateful allow-list firewall for ports of one VPC. Without rules a port gets nothing in or out.

    Every VPC has one `is_default` group (egress to anywhere, ingress from members of the same group); every
    other group starts with egress to anywhere (IPv4 and IPv6) and no ingress."""

    vpc = models.ForeignKey(Vpc, on_delete=models.PROTECT, related_name="security_groups")
    name = models.SlugField(max_length=63)
    description = models.CharField(max_length=200, blank=True)
    is_default = models.BooleanField(default=False)

    class Meta:
        ordering = ["vpc", "name"]
        constraints = [
            models.UniqueConstraint(fields=["vpc", "name"], name="networking_sg_name_uniq"),
            models.UniqueConstraint(fields=["vpc"], condition=Q(is_default=True), name="networking_sg_one_default"),
        ]


class SecurityGroupRule(ProjectOwned):
    """One allow rule in canonical form (`apps.networking.sg_rules`): protocol "" = any; ports null = all."""

    security_group = models.ForeignKey(SecurityGroup, on_delete=models.CASCADE, related_name="rules")
    direction = models.CharField(max_length=8, choices=Direction.choices)
    ethertype = models.CharField(max_length=4, choices=Ethertype.choices, default=Ethertype.IPV4)
    protocol = models.CharField(max_length=16, blank=True)
    port_range_min = models.PositiveIntegerField(null=True, blank=True)
    port_range_max = models.PositiveIntegerField(null=True, blank=True)
    icmp_type = models.PositiveSmallIntegerField(null=True, blank=True)
    icmp_code = models.PositiveSmallIntegerField(null=True, blank=True)
    remote_ip_prefix = models.CharField(max_length=43, blank=True)
    remote_group = models.ForeignKey(SecurityGroup, on_delete=models.PROTECT, null=True, blank=True,
                                     related_name="referencing_rules")
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["security_group", "created_at"]
        constraints = [
            models.CheckConstraint(condition=~(Q(remote_group__isnull=False) & ~Q(remote_ip_prefix="")),
                                   name="networking_sgr_one_remote"),
        ]


class Port(ProjectOwned):
    """A virtual NIC in one subnet (an OVN logical switch port): MAC, fixed IPs, bound instance, groups.
    `physical_network` set: the port is a bare-metal server's physical NIC (its MAC) on that physical network,
    reached through the subnet's localnet port (ADR 1212)."""

    vpc = models.ForeignKey(Vpc, on_delete=models.PROTECT, related_name="ports")
    subnet = models.ForeignKey(Subnet, on_delete=models.PROTECT, related_name="ports")
    name = models.CharField(max_length=63, blank=True)
    mac_address = models.CharField(max_length=17, unique=True)
    instance_id = models.UUIDField(null=True, blank=True, db_index=True,
                                   help_text="compute instance the port is bound to")
    security_groups = models.ManyToManyField(SecurityGroup, related_name="ports", blank=True)
    allowed_address_pairs = ArrayField(models.CharField(max_length=43), default=list, blank=True,
                                       help_text="extra source prefixes the port may send from (with its MAC)")
    physical_network = models.CharField(max_length=64, blank=True,
                                        help_text="bare-metal NIC: the physical network (Ethernet fabric) it is on")

    class Meta:
        ordering = ["created_at"]

    @property
    def source_check_disabled(self) -> bool:
        """True when a catch-all pair (0.0.0.0/0, ::/0) lets the port send from any address."""
        return any(p.endswith("/0") for p in self.allowed_address_pairs)


class IpAllocation(ProjectOwned):
    """A fixed IP of a port. Unique per subnet, so the database refuses a double assignment."""

    port = models.ForeignKey(Port, on_delete=models.CASCADE, related_name="fixed_ips")
    subnet = models.ForeignKey(Subnet, on_delete=models.PROTECT, related_name="ip_allocations")
    address = models.GenericIPAddressField()

    class Meta:
        ordering = ["subnet", "address"]
        constraints = [models.UniqueConstraint(fields=["subnet", "address"], name="networking_ip_subnet_uniq")]


class PublicIpPool(TimestampedModel):
    """An operator-defined external range: addresses `first_ip`..`last_ip` of `cidr`, upstream `gateway_ip`.

    `network_name` is the OVN localnet network name (bridge mapping) of the external switch."""

    name = models.SlugField(max_length=63, unique=True)
    cidr = models.CharField(max_length=43)
    first_ip = models.GenericIPAddressField()
    last_ip = models.GenericIPAddressField()
    gateway_ip = models.GenericIPAddressField()
    network_name = models.CharField(max_length=63, default="physnet-public")
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["name"]


class PublicIp(ProjectOwned):
    """An address from a pool held by a project: a floating IP (DNAT+SNAT to `port`) or a VPC router's SNAT
    address (`kind=router_gateway`, one per VPC, allocated with the VPC's first floating IP)."""

    pool = models.ForeignKey(PublicIpPool, on_delete=models.PROTECT, related_name="addresses")
    address = models.GenericIPAddressField()
    kind = models.CharField(max_length=16, choices=PublicIpKind.choices, default=PublicIpKind.FLOATING)
    vpc = models.ForeignKey(Vpc, on_delete=models.PROTECT, related_name="public_ips")
    port = models.OneToOneField(Port, on_delete=models.PROTECT, null=True, blank=True, related_name="public_ip")

    class Meta:
        ordering = ["pool", "address"]
        constraints = [
            models.UniqueConstraint(fields=["pool", "address"], name="networking_pip_pool_address_uniq"),
            models.UniqueConstraint(fields=["vpc"], condition=Q(kind="router_gateway"),
                                    name="networking_pip_one_gateway_per_vpc"),
        ]


class PublicIpHolding(ProjectOwned):
    """How long a project held a floating IP: `[start, end)`, `end` null while held. Billing reads these
    (usage source `networking.public_ip`); the PublicIp row itself is deleted on release."""

    public_ip_id = models.UUIDField(db_index=True)
    address = models.GenericIPAddressField()
    pool_name = models.CharField(max_length=63)
    start = models.DateTimeField()
    end = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["start"]
        constraints = [
            models.CheckConstraint(condition=Q(end__isnull=True) | Q(end__gt=models.F("start")),
                                   name="networking_piph_end_after_start"),
            models.UniqueConstraint(fields=["public_ip_id"], condition=Q(end__isnull=True),
                                    name="networking_piph_one_open"),
        ]
