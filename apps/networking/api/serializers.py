"""Input/Output serializers of the networking API. Domain rules live in the services; ids in request bodies
resolve only among objects the caller can see (`apps.core.references.VisibleField`: others are "Not found.", a 400,
ADR 0010)."""
from rest_framework import serializers

from apps.core.errors import field_error
from apps.core.references import VisibleField
from apps.core.serializers import ModelSerializer, Serializer
from apps.inventory.models import Fabric, HcaPort
from apps.inventory.states import FabricKind
from apps.tenancy.selectors import project_list_visible_to

from .. import selectors
from ..ipam import AddressError
from ..models import (
    IbPartition,
    IbPartitionMember,
    PkeyPool,
    Port,
    PublicIp,
    PublicIpPool,
    SecurityGroup,
    SecurityGroupRule,
    Subnet,
    VirtualGuidPool,
    Vpc,
)
from ..services.vpcs import vpc_cidr_check
from ..states import Direction, Ethertype, Membership


class PoolNameField(serializers.SlugRelatedField):
    def __init__(self, **kwargs):
        super().__init__(slug_field="name", queryset=PublicIpPool.objects.all(), **kwargs)


class IbFabricField(serializers.SlugRelatedField):
    def __init__(self, **kwargs):
        super().__init__(slug_field="name", queryset=Fabric.objects.filter(kind=FabricKind.INFINIBAND), **kwargs)


# --- VPCs and subnets -------------------------------------------------------------------------------------
class VpcOutput(ModelSerializer):
    class Meta:
        model = Vpc
        fields = ["id", "project", "name", "description", "cidr", "ipv6_cidr", "created_at", "updated_at"]
        read_only_fields = fields


class VpcCreateInput(Serializer):
    project = VisibleField(project_list_visible_to)
    name = serializers.SlugField(max_length=63)
    cidr = serializers.CharField(max_length=43, help_text="IPv4 CIDR inside RFC 1918 or an operator-allowed range")
    ipv6_cidr = serializers.CharField(max_length=43, required=False, allow_blank=True,
                                      help_text="optional IPv6 CIDR inside fc00::/7 (RFC 4193)")
    description = serializers.CharField(max_length=200, required=False, allow_blank=True)

    # The CIDRs' own checks run here beside the name's, so one 400 names every bad field (the service runs them
    # again for its other callers).
    def validate_cidr(self, value: str) -> str:
        return _vpc_cidr(value, "cidr")

    def validate_ipv6_cidr(self, value: str) -> str:
        return _vpc_cidr(value, "ipv6_cidr") if value else value


def _vpc_cidr(value: str, field: str) -> str:
    try:
        vpc_cidr_check(value, field=field)
    except AddressError as exc:
        raise field_error(str(exc), code=exc.code)
    return value


class VpcUpdateInput(Serializer):
    description = serializers.CharField(max_length=200, allow_blank=True)


class SubnetOutput(ModelSerializer):
    class Meta:
        model = Subnet
        fields = ["id", "project", "vpc", "name", "cidr", "ip_version", "gateway_ip", "dhcp_start", "dhcp_end",
                  "enable_dhcp", "dns_nameservers", "baremetal_vlan", "created_at", "updated_at"]
        read_only_fields = fields


class SubnetCreateInput(Serializer):
    vpc = VisibleField(selectors.vpc_list_visible_to)
    name = serializers.SlugField(max_length=63)
    cidr = serializers.CharField(max_length=43)
    gateway_ip = serializers.CharField(required=False, help_text="default: the first usable address")
    dhcp_start = serializers.CharField(required=False)
    dhcp_end = serializers.CharField(required=False)
    enable_dhcp = serializers.BooleanField(required=False, default=True)
    dns_nameservers = serializers.ListField(child=serializers.CharField(max_length=45), required=False,
                                            max_length=5)


# --- security groups --------------------------------------------------------------------------------------
class SecurityGroupRuleOutput(ModelSerializer):
    class Meta:
        model = SecurityGroupRule
        fields = ["id", "security_group", "direction", "ethertype", "protocol", "port_range_min", "port_range_max",
                  "icmp_type", "icmp_code", "remote_ip_prefix", "remote_group", "description", "created_at"]
        read_only_fields = fields


class RuleInput(Serializer):
    direction = serializers.ChoiceField(choices=Direction.choices)
    ethertype = serializers.ChoiceField(choices=Ethertype.choices, required=False, default="IPv4")
    protocol = serializers.CharField(required=False, allow_blank=True, allow_null=True, max_length=16,
                                     help_text="tcp, udp, icmp, ... or an IP protocol number; any/empty: all")
    port_range_min = serializers.IntegerField(required=False, allow_null=True)
    port_range_max = serializers.IntegerField(required=False, allow_null=True)
    icmp_type = serializers.IntegerField(required=False, allow_null=True)
    icmp_code = serializers.IntegerField(required=False, allow_null=True)
    remote_ip_prefix = serializers.CharField(required=False, allow_blank=True, allow_null=True, max_length=43)
    remote_group = VisibleField(selectors.security_group_list_visible_to, required=False, allow_null=True)
    description = serializers.CharField(required=False, allow_blank=True, max_length=200)


class SecurityGroupRuleCreateInput(RuleInput):
    security_group = VisibleField(selectors.security_group_list_visible_to)


class SecurityGroupOutput(ModelSerializer):
    rules = SecurityGroupRuleOutput(many=True, read_only=True)

    class Meta:
        model = SecurityGroup
        fields = ["id", "project", "vpc", "name", "description", "is_default", "rules", "created_at", "updated_at"]
        read_only_fields = fields


class SecurityGroupCreateInput(Serializer):
    vpc = VisibleField(selectors.vpc_list_visible_to)
    name = serializers.SlugField(max_length=63)
    description = serializers.CharField(max_length=200, required=False, allow_blank=True)
    rules = RuleInput(many=True, required=False)


# --- ports and public IPs ---------------------------------------------------------------------------------
class FixedIpOutput(Serializer):
    subnet = serializers.UUIDField(source="subnet_id")
    ip_address = serializers.IPAddressField(source="address")


class PortOutput(ModelSerializer):
    fixed_ips = FixedIpOutput(many=True, read_only=True)
    security_groups = serializers.PrimaryKeyRelatedField(many=True, read_only=True)
    source_check_disabled = serializers.BooleanField(read_only=True)

    class Meta:
        model = Port
        fields = ["id", "project", "vpc", "subnet", "name", "mac_address", "fixed_ips", "security_groups",
                  "allowed_address_pairs", "source_check_disabled", "instance_id", "physical_network", "created_at",
                  "updated_at"]
        read_only_fields = fields


class PortCreateInput(Serializer):
    subnet = VisibleField(selectors.subnet_list_visible_to)
    name = serializers.CharField(max_length=63, required=False, allow_blank=True)
    ip_addresses = serializers.ListField(child=serializers.CharField(max_length=45), required=False, max_length=8,
                                         help_text="fixed IPs in the subnet; default: the lowest free address")
    security_groups = VisibleField(selectors.security_group_list_visible_to, many=True, required=False,
                                   max_length=16, help_text="default: the VPC's default group")
    mac_address = serializers.CharField(max_length=17, required=False)
    allowed_address_pairs = serializers.ListField(child=serializers.CharField(max_length=43), required=False,
                                                  max_length=10, help_text="extra source prefixes (RW-072 rules)")


class PortUpdateInput(Serializer):
    name = serializers.CharField(max_length=63, required=False, allow_blank=True)
    security_groups = VisibleField(selectors.security_group_list_visible_to, many=True, required=False,
                                   max_length=16)
    allowed_address_pairs = serializers.ListField(child=serializers.CharField(max_length=43), required=False,
                                                  max_length=10)


class PublicIpOutput(ModelSerializer):
    pool = serializers.SlugRelatedField(slug_field="name", read_only=True)
    kind = serializers.CharField(read_only=True, help_text="floating | router_gateway")

    class Meta:
        model = PublicIp
        fields = ["id", "project", "vpc", "pool", "address", "kind", "port", "created_at", "updated_at"]
        read_only_fields = fields


class PublicIpCreateInput(Serializer):
    vpc = VisibleField(selectors.vpc_list_visible_to)
    pool = PoolNameField(help_text="name of an operator pool (GET /public-ip-pools)")
    port = VisibleField(selectors.port_list_visible_to, required=False, allow_null=True)


class PublicIpUpdateInput(Serializer):
    port = VisibleField(selectors.port_list_visible_to, allow_null=True,
                        help_text="NAT to this port; null removes the NAT")


class PublicIpPoolOutput(ModelSerializer):
    class Meta:
        model = PublicIpPool
        fields = ["id", "name", "cidr", "first_ip", "last_ip", "gateway_ip", "network_name", "description",
                  "created_at"]
        read_only_fields = fields


class PublicIpPoolCreateInput(Serializer):
    name = serializers.SlugField(max_length=63)
    cidr = serializers.CharField(max_length=43)
    first_ip = serializers.CharField(max_length=45)
    last_ip = serializers.CharField(max_length=45)
    gateway_ip = serializers.CharField(max_length=45)
    network_name = serializers.CharField(max_length=63, required=False)
    description = serializers.CharField(max_length=200, required=False, allow_blank=True)


# --- InfiniBand -------------------------------------------------------------------------------------------
class IbPartitionMemberOutput(ModelSerializer):
    class Meta:
        model = IbPartitionMember
        fields = ["guid", "membership", "instance_id", "added_via_api", "created_at"]
        read_only_fields = fields


class IbMemberAddInput(Serializer):
    guid = serializers.CharField(max_length=23, help_text="port GUID, 0x0c42a10300aa0001 or 0c:42:a1:03:00:aa:00:01: "
                                                          "one of the project's instances' (operators: any port "
                                                          "of the fabric)")
    membership = serializers.CharField(max_length=16, required=False, default=Membership.LIMITED,
                                       help_text="`limited` (the default: talks to full members only) or `full`; "
                                                 "anything else is 400 `invalid_membership`")


class IbServicePortInput(Serializer):
    hca_port = serializers.PrimaryKeyRelatedField(queryset=HcaPort.objects.all(),
                                                  help_text="the shared port (any project's partitions may hold it "
                                                            "as a limited member)")


class IbPartitionOutput(ModelSerializer):
    fabric = serializers.SlugRelatedField(slug_field="name", read_only=True)
    pkey_hex = serializers.SerializerMethodField()
    members = IbPartitionMemberOutput(many=True, read_only=True)

    class Meta:
        model = IbPartition
        fields = ["id", "project", "fabric", "name", "pkey", "pkey_hex", "ipoib", "mtu", "rate_gbps", "sl", "index0",
                  "members", "created_at", "updated_at"]
        read_only_fields = fields

    def get_pkey_hex(self, obj) -> str:
        return f"{obj.pkey:#06x}"


class IbPartitionCreateInput(Serializer):
    project = VisibleField(project_list_visible_to)
    fabric = IbFabricField(help_text="InfiniBand fabric name")
    name = serializers.SlugField(max_length=63)
    pkey = serializers.CharField(required=False, max_length=10,
                                 help_text="optional: 0x0001-0x7ffe inside the fabric's pool (hex or decimal)")
    ipoib = serializers.BooleanField(required=False, default=True)
    mtu = serializers.IntegerField(required=False, allow_null=True, help_text="256, 512, 1024, 2048 or 4096")
    rate_gbps = serializers.IntegerField(required=False, allow_null=True)
    sl = serializers.IntegerField(required=False, allow_null=True, help_text="service level 0-15")
    index0 = serializers.BooleanField(required=False, default=False)


class PkeyPoolOutput(ModelSerializer):
    fabric = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = PkeyPool
        fields = ["id", "fabric", "first_pkey", "last_pkey", "created_at", "updated_at"]
        read_only_fields = fields


class PkeyPoolSetInput(Serializer):
    fabric = IbFabricField()
    first_pkey = serializers.CharField(max_length=10, help_text="0x0001-0x7ffe")
    last_pkey = serializers.CharField(max_length=10, help_text="0x0001-0x7ffe")


class VirtualGuidPoolOutput(ModelSerializer):
    hca_port_guid = serializers.CharField(source="hca_port.port_guid", read_only=True)
    allocated = serializers.SerializerMethodField()

    class Meta:
        model = VirtualGuidPool
        fields = ["id", "hca_port", "hca_port_guid", "first_guid", "size", "allocated", "created_at", "updated_at"]
        read_only_fields = fields

    def get_allocated(self, obj) -> int:
        return obj.guids.count()


class VirtualGuidPoolSetInput(Serializer):
    hca_port = serializers.PrimaryKeyRelatedField(queryset=HcaPort.objects.all())
    first_guid = serializers.CharField(max_length=23, help_text="0x0200000000000000 or 02:00:00:00:00:00:00:00")
    size = serializers.IntegerField(min_value=1, max_value=65536)

