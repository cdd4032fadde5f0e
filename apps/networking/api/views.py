"""Networking API: /vpcs, /subnets, /security-groups, /security-group-rules, /ports, /public-ips,
/ib-partitions (tenants) and /public-ip-pools, /pkey-pools (operators).

Querysets come from the `*_list_visible_to` selectors (another tenant's object is a 404); writes are authorized
in the services (viewer or read-only token → 403). Views parse, call one service, format.
"""
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.core.api import ApiViewMixin
from apps.core.idempotency import idempotent_create
from apps.core.schema import problems
from apps.identity.permissions import IsStaffOperator

from .. import selectors, services
from . import filters
from . import serializers as s


class _Base(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    pass


class VpcViewSet(_Base):
    """VPCs: a tenant network with one router. Creating one also creates its default security group."""

    serializer_class = s.VpcOutput
    filterset_class = filters.VpcFilter

    def get_queryset(self):
        return selectors.vpc_list_visible_to(self.request.user)

    @extend_schema(request=s.VpcCreateInput, responses={201: s.VpcOutput})
    @idempotent_create
    def create(self, request):
        vpc = services.vpc_create(actor=request.user, **self._input(s.VpcCreateInput))
        return self._out(vpc, status.HTTP_201_CREATED)

    @extend_schema(request=s.VpcUpdateInput, responses={200: s.VpcOutput})
    def partial_update(self, request, pk=None):
        vpc = services.vpc_update(actor=request.user, vpc=self.get_object(), **self._input(s.VpcUpdateInput))
        return self._out(vpc)

    @extend_schema(responses={204: None, **problems({
        409: "in_use: the VPC still has subnets or floating IPs."})})
    def destroy(self, request, pk=None):
        services.vpc_delete(actor=request.user, vpc=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class SubnetViewSet(_Base):
    """Subnets (IPv4 or IPv6) of a VPC, with gateway, DHCP range and DNS servers."""

    serializer_class = s.SubnetOutput
    filterset_class = filters.SubnetFilter

    def get_queryset(self):
        return selectors.subnet_list_visible_to(self.request.user)

    @extend_schema(request=s.SubnetCreateInput, responses={201: s.SubnetOutput})
    @idempotent_create
    def create(self, request):
        subnet = services.subnet_create(actor=request.user, **self._input(s.SubnetCreateInput))
        return self._out(subnet, status.HTTP_201_CREATED)

    @extend_schema(responses={204: None, **problems({
        409: "in_use: the subnet still has ports."})})
    def destroy(self, request, pk=None):
        services.subnet_delete(actor=request.user, subnet=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class SecurityGroupViewSet(_Base):
    """Security groups with their rules (nested on create and in every response). A new group starts with
    egress to anywhere (one IPv4 and one IPv6 rule, any protocol) and no ingress; delete those rules to close
    egress."""

    serializer_class = s.SecurityGroupOutput
    filterset_class = filters.SecurityGroupFilter

    def get_queryset(self):
        return selectors.security_group_list_visible_to(self.request.user)

    @extend_schema(request=s.SecurityGroupCreateInput, responses={201: s.SecurityGroupOutput})
    @idempotent_create
    def create(self, request):
        sg = services.security_group_create(actor=request.user, **self._input(s.SecurityGroupCreateInput))
        return self._out(selectors.security_group_list_visible_to(request.user).get(pk=sg.pk),
                         status.HTTP_201_CREATED)

    @extend_schema(responses={204: None, **problems({
        409: "in_use: the VPC's default group, a group with ports, or a group another group's rule "
             "refers to."})})
    def destroy(self, request, pk=None):
        services.security_group_delete(actor=request.user, security_group=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class SecurityGroupRuleViewSet(_Base):
    """Single rules, to add to or remove from an existing group."""

    serializer_class = s.SecurityGroupRuleOutput
    filterset_class = filters.SecurityGroupRuleFilter

    def get_queryset(self):
        return selectors.security_group_rule_list_visible_to(self.request.user)

    @extend_schema(request=s.SecurityGroupRuleCreateInput, responses={201: s.SecurityGroupRuleOutput})
    @idempotent_create
    def create(self, request):
        rule = services.security_group_rule_create(actor=request.user,
                                                   **self._input(s.SecurityGroupRuleCreateInput))
        return self._out(rule, status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        services.security_group_rule_delete(actor=request.user, rule=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class PortViewSet(_Base):
    """Ports: a MAC and fixed IPs in one subnet, security groups, and the instance bound to it."""

    serializer_class = s.PortOutput
    filterset_class = filters.PortFilter

    def get_queryset(self):
        return selectors.port_list_visible_to(self.request.user)

    @extend_schema(request=s.PortCreateInput, responses={201: s.PortOutput})
    @idempotent_create
    def create(self, request):
        port = services.port_create(actor=request.user, **self._input(s.PortCreateInput))
        return self._out(self.get_queryset().get(pk=port.pk), status.HTTP_201_CREATED)

    @extend_schema(request=s.PortUpdateInput, responses={200: s.PortOutput})
    def partial_update(self, request, pk=None):
        port = services.port_update(actor=request.user, port=self.get_object(), **self._input(s.PortUpdateInput))
        return self._out(self.get_queryset().get(pk=port.pk))

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        services.port_delete(actor=request.user, port=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class PublicIpViewSet(_Base):
    """Public IPs from operator pools, NATed on the VPC's router to a port (PATCH `port` to move or clear)."""

    serializer_class = s.PublicIpOutput
    filterset_class = filters.PublicIpFilter

    def get_queryset(self):
        return selectors.public_ip_list_visible_to(self.request.user)

    @extend_schema(request=s.PublicIpCreateInput, responses={201: s.PublicIpOutput})
    @idempotent_create
    def create(self, request):
        pip = services.public_ip_create(actor=request.user, **self._input(s.PublicIpCreateInput))
        return self._out(pip, status.HTTP_201_CREATED)

    @extend_schema(request=s.PublicIpUpdateInput, responses={200: s.PublicIpOutput})
    def partial_update(self, request, pk=None):
        pip = services.public_ip_associate(actor=request.user, public_ip=self.get_object(),
                                           **self._input(s.PublicIpUpdateInput))
        return self._out(pip)

    @extend_schema(responses={204: None, **problems({
        409: "in_use: the router's address, released with its VPC."})})
    def destroy(self, request, pk=None):
        services.public_ip_delete(actor=request.user, public_ip=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class IbPartitionViewSet(_Base):
    """InfiniBand partitions: a P_Key from the fabric's pool; members join and leave with instances."""

    serializer_class = s.IbPartitionOutput
    filterset_class = filters.IbPartitionFilter

    def get_queryset(self):
        return selectors.ib_partition_list_visible_to(self.request.user)

    @extend_schema(request=s.IbPartitionCreateInput, responses={201: s.IbPartitionOutput})
    @idempotent_create
    def create(self, request):
        part = services.ib_partition_create(actor=request.user, **self._input(s.IbPartitionCreateInput))
        return self._out(part, status.HTTP_201_CREATED)

    @extend_schema(responses={204: None, **problems({
        409: "in_use: the partition still has members."})})
    def destroy(self, request, pk=None):
        services.ib_partition_delete(actor=request.user, partition=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=s.IbServicePortInput, responses={201: s.IbPartitionOutput})
    @action(detail=True, methods=["post"], url_path="service-ports", permission_classes=[IsStaffOperator])
    def service_ports(self, request, pk=None):
        """Staff operators: add a shared service port (storage gateway, service node) as a limited member;
        the same port may be a limited member of several projects' partitions, never a full member of two."""
        part = self.get_object()
        services.ib_partition_service_port_join(actor=request.user, partition=part,
                                                **self._input(s.IbServicePortInput))
        return self._out(selectors.ib_partition_list_visible_to(request.user).get(pk=part.pk),
                         status.HTTP_201_CREATED)

    @extend_schema(request=s.IbMemberAddInput, responses={201: s.IbPartitionOutput, **problems({
        400: "invalid_guid, invalid_membership; validation_error \"Not found.\" naming `guid` for a GUID that is "
             "not the project's own (another project's included) or, for operators, not on the fabric.",
        409: "already_member (the GUID is a member with the other membership), guid_in_other_project, "
             "pkey_limit_per_port."})})
    @action(detail=True, methods=["post"], url_path="members")
    def members(self, request, pk=None):
        """Add a GUID as a limited (default) or full member. Project members: a GUID of one of the project's
        instances already in one of its partitions on this fabric (it leaves with that instance). Staff
        operators: also any HCA port or virtual GUID of the fabric; a GUID in several projects' partitions is a
        limited member everywhere (as `service-ports`)."""
        part = self.get_object()
        services.ib_partition_member_add(actor=request.user, partition=part, **self._input(s.IbMemberAddInput))
        return self._out(selectors.ib_partition_list_visible_to(request.user).get(pk=part.pk),
                         status.HTTP_201_CREATED)

    @extend_schema(responses={204: None, **problems({
        404: "not_found: the partition is not visible, or the GUID is not its member.",
        409: "in_use: the GUID joined with its instance (it leaves when the instance is deleted)."})})
    @action(detail=True, methods=["delete"], url_path=r"members/(?P<guid>[^/]+)")
    def member_remove(self, request, pk=None, guid=None):
        """Remove a member added through `members` or `service-ports`."""
        services.ib_partition_member_remove(actor=request.user, partition=self.get_object(), guid=guid)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PublicIpPoolViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Operator-defined external ranges. Every user may list them (to pick one); operators create them."""

    staff_actions = {"create"}

    _input = _Base._input
    _out = _Base._out

    serializer_class = s.PublicIpPoolOutput
    filterset_class = filters.PublicIpPoolFilter

    def get_queryset(self):
        return selectors.public_ip_pool_list_visible_to(self.request.user)

    @extend_schema(request=s.PublicIpPoolCreateInput, responses={201: s.PublicIpPoolOutput})
    def create(self, request):
        pool = services.public_ip_pool_create(actor=request.user, **self._input(s.PublicIpPoolCreateInput))
        return self._out(pool, status.HTTP_201_CREATED)


class PkeyPoolViewSet(_Base):
    """P_Key pools per InfiniBand fabric (staff). POST sets (creates or replaces) a fabric's pool."""

    serializer_class = s.PkeyPoolOutput
    filterset_class = filters.PkeyPoolFilter
    permission_classes = [IsStaffOperator]

    def get_queryset(self):
        return selectors.pkey_pool_list_visible_to(self.request.user)

    @extend_schema(request=s.PkeyPoolSetInput, responses={201: s.PkeyPoolOutput})
    def create(self, request):
        pool = services.pkey_pool_set(actor=request.user, **self._input(s.PkeyPoolSetInput))
        return self._out(pool, status.HTTP_201_CREATED)


class VirtualGuidPoolViewSet(_Base):
    """Virtual port GUID ranges for the SR-IOV VFs of HCA ports (staff). POST sets a port's pool."""

    serializer_class = s.VirtualGuidPoolOutput
    filterset_class = filters.VirtualGuidPoolFilter
    permission_classes = [IsStaffOperator]

    def get_queryset(self):
        return selectors.virtual_guid_pool_list_visible_to(self.request.user)

    @extend_schema(request=s.VirtualGuidPoolSetInput, responses={201: s.VirtualGuidPoolOutput})
    def create(self, request):
        pool = services.virtual_guid_pool_set(actor=request.user, **self._input(s.VirtualGuidPoolSetInput))
        return self._out(pool, status.HTTP_201_CREATED)
