"""FilterSets of the networking API (explicit fields)."""
import django_filters

from ..models import (
    IbPartition,
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


class VpcFilter(django_filters.FilterSet):
    class Meta:
        model = Vpc
        fields = ["project", "name"]


class SubnetFilter(django_filters.FilterSet):
    class Meta:
        model = Subnet
        fields = ["project", "vpc", "ip_version", "name"]


class SecurityGroupFilter(django_filters.FilterSet):
    class Meta:
        model = SecurityGroup
        fields = ["project", "vpc", "name", "is_default"]


class SecurityGroupRuleFilter(django_filters.FilterSet):
    class Meta:
        model = SecurityGroupRule
        fields = ["security_group", "direction", "ethertype", "protocol"]


class PortFilter(django_filters.FilterSet):
    class Meta:
        model = Port
        fields = ["project", "vpc", "subnet", "instance_id", "mac_address"]


class PublicIpFilter(django_filters.FilterSet):
    class Meta:
        model = PublicIp
        fields = ["project", "vpc", "kind", "port"]


class PublicIpPoolFilter(django_filters.FilterSet):
    class Meta:
        model = PublicIpPool
        fields = ["name"]


class IbPartitionFilter(django_filters.FilterSet):
    fabric = django_filters.CharFilter(field_name="fabric__name")

    class Meta:
        model = IbPartition
        fields = ["project", "fabric", "name", "pkey"]


class PkeyPoolFilter(django_filters.FilterSet):
    fabric = django_filters.CharFilter(field_name="fabric__name")

    class Meta:
        model = PkeyPool
        fields = ["fabric"]


class VirtualGuidPoolFilter(django_filters.FilterSet):
    class Meta:
        model = VirtualGuidPool
        fields = ["hca_port"]
