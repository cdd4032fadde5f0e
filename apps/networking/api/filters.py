"""FilterSets of the networking API (explicit fields; references resolve among what the caller can see)."""
import django_filters

from apps.core.filters import FilterSet, NameContainsFilter
from apps.core.references import VisibleFilter
from apps.inventory.selectors import hca_port_list_visible_to
from apps.tenancy.selectors import project_list_visible_to

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
from ..selectors import (
    port_list_visible_to,
    security_group_list_visible_to,
    subnet_list_visible_to,
    vpc_list_visible_to,
)

INSTANCES = "apps.compute.selectors.instance_list_visible_to"


class VpcFilter(FilterSet):
    name_contains = NameContainsFilter()
    project = VisibleFilter(project_list_visible_to)

    class Meta:
        model = Vpc
        fields = ["project", "name", "name_contains"]


class SubnetFilter(FilterSet):
    project = VisibleFilter(project_list_visible_to)
    vpc = VisibleFilter(vpc_list_visible_to)

    class Meta:
        model = Subnet
        fields = ["project", "vpc", "ip_version", "name"]


class SecurityGroupFilter(FilterSet):
    project = VisibleFilter(project_list_visible_to)
    vpc = VisibleFilter(vpc_list_visible_to)

    class Meta:
        model = SecurityGroup
        fields = ["project", "vpc", "name", "is_default"]


class SecurityGroupRuleFilter(FilterSet):
    security_group = VisibleFilter(security_group_list_visible_to)

    class Meta:
        model = SecurityGroupRule
        fields = ["security_group", "direction", "ethertype", "protocol"]


class PortFilter(FilterSet):
    project = VisibleFilter(project_list_visible_to)
    vpc = VisibleFilter(vpc_list_visible_to)
    subnet = VisibleFilter(subnet_list_visible_to)
    instance = VisibleFilter(INSTANCES, field_name="instance_id", help_text="the bound instance's id")

    class Meta:
        model = Port
        fields = ["project", "vpc", "subnet", "instance", "mac_address"]


class PublicIpFilter(FilterSet):
    project = VisibleFilter(project_list_visible_to)
    vpc = VisibleFilter(vpc_list_visible_to)
    port = VisibleFilter(port_list_visible_to)

    class Meta:
        model = PublicIp
        fields = ["project", "vpc", "kind", "port"]


class PublicIpPoolFilter(FilterSet):
    class Meta:
        model = PublicIpPool
        fields = ["name"]


class IbPartitionFilter(FilterSet):
    name_contains = NameContainsFilter()
    project = VisibleFilter(project_list_visible_to)
    fabric = django_filters.CharFilter(field_name="fabric__name")

    class Meta:
        model = IbPartition
        fields = ["project", "fabric", "name", "pkey", "name_contains"]


class PkeyPoolFilter(FilterSet):
    fabric = django_filters.CharFilter(field_name="fabric__name")

    class Meta:
        model = PkeyPool
        fields = ["fabric"]


class VirtualGuidPoolFilter(FilterSet):
    hca_port = VisibleFilter(hca_port_list_visible_to)

    class Meta:
        model = VirtualGuidPool
        fields = ["hca_port"]
