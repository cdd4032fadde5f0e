"""Tenancy API: /organizations, /projects, /memberships, /invitations, /quotas.

Querysets come from the `*_list_visible_to` selectors, so another tenant's object is a 404. Views parse input,
call one service and format the result; authorization of writes is in the services (`apps.tenancy.authz`).
"""
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from apps.core.api import ApiViewMixin, validated
from apps.core.idempotency import idempotent_create
from apps.core.schema import problems

from .. import selectors, services
from . import filters
from . import serializers as s


class _Base(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    pass


class OrganizationViewSet(_Base):
    """Organizations (billing accounts). Staff create them and invite the owner."""

    staff_actions = {"create"}

    serializer_class = s.OrganizationOutput
    filterset_class = filters.OrganizationFilter

    def get_queryset(self):
        return selectors.organization_list_visible_to(self.request.user)

    @extend_schema(request=s.OrganizationCreateInput, responses={201: s.OrganizationOutput})
    def create(self, request):
        data = self._input(s.OrganizationCreateInput)
        org = services.organization_create(actor=request.user, **data)
        return self._out(org, status.HTTP_201_CREATED)

    @extend_schema(request=s.OrganizationUpdateInput, responses={200: s.OrganizationOutput})
    def partial_update(self, request, pk=None):
        org = services.organization_update(actor=request.user, organization=self.get_object(),
                                           **self._input(s.OrganizationUpdateInput))
        return self._out(org)


class ProjectViewSet(_Base):
    """Projects: the isolation boundary of every tenant resource."""

    serializer_class = s.ProjectOutput
    filterset_class = filters.ProjectFilter

    def get_queryset(self):
        return selectors.project_list_visible_to(self.request.user).select_related("organization")

    @extend_schema(request=s.ProjectCreateInput, responses={201: s.ProjectOutput})
    @idempotent_create
    def create(self, request):
        project = services.project_create(actor=request.user, **self._input(s.ProjectCreateInput))
        return self._out(project, status.HTTP_201_CREATED)

    @extend_schema(request=s.ProjectUpdateInput, responses={200: s.ProjectOutput})
    def partial_update(self, request, pk=None):
        project = services.project_update(actor=request.user, project=self.get_object(),
                                          **self._input(s.ProjectUpdateInput))
        return self._out(project)

    @extend_schema(responses={204: None, **problems({
        409: "project_not_empty: the project still holds instances, networks or other resources; "
             "delete them first."})})
    def destroy(self, request, pk=None):
        services.project_delete(actor=request.user, project=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class MembershipViewSet(_Base):
    """Roles of users in organizations (`project` null) and projects."""

    serializer_class = s.MembershipOutput
    filterset_class = filters.MembershipFilter

    def get_queryset(self):
        return selectors.membership_list_visible_to(self.request.user)

    @extend_schema(request=s.MembershipCreateInput, responses={202: s.InvitationOutput},
                   description="Invites the e-mail (an existing user accepts like a new one): 202 with the pending "
                               "invitation, the same answer whether or not the e-mail has an account.")
    def create(self, request):
        invitation = services.membership_create(actor=request.user, **self._input(s.MembershipCreateInput))
        return Response(s.InvitationOutput(invitation).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=s.MembershipUpdateInput, responses={200: s.MembershipOutput})
    def partial_update(self, request, pk=None):
        membership = services.membership_update(actor=request.user, membership=self.get_object(),
                                                **self._input(s.MembershipUpdateInput))
        return self._out(membership)

    @extend_schema(responses={204: None, **problems({
        409: "last_owner: the organization's last owner cannot be removed."})})
    def destroy(self, request, pk=None):
        services.membership_delete(actor=request.user, membership=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class InvitationViewSet(_Base):
    """E-mail invitations; `POST /invitations/accept` (no login needed) redeems the e-mailed token once."""

    serializer_class = s.InvitationOutput
    filterset_class = filters.InvitationFilter

    def get_queryset(self):
        return selectors.invitation_list_visible_to(self.request.user)

    def get_permissions(self):
        if self.action == "accept":
            return [AllowAny()]
        return super().get_permissions()

    @extend_schema(request=s.InvitationCreateInput, responses={201: s.InvitationOutput})
    def create(self, request):
        invitation = services.invitation_create(actor=request.user, **self._input(s.InvitationCreateInput))
        return self._out(invitation, status.HTTP_201_CREATED)

    @extend_schema(responses={204: None, **problems({
        409: "invitation_already_used: the invitation was accepted; remove the membership instead."})})
    def destroy(self, request, pk=None):
        services.invitation_revoke(actor=request.user, invitation=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=s.InvitationAcceptInput, responses={201: s.MembershipOutput, **problems({
        410: "invitation_expired, invitation_revoked: the link existed but can no longer be used; ask "
             "for a new invitation."})})
    @action(detail=False, methods=["post"], serializer_class=s.MembershipOutput)
    def accept(self, request):
        data = self._input(s.InvitationAcceptInput)
        membership = services.invitation_accept(actor=request.user, **data)
        return Response(s.MembershipOutput(membership).data, status=status.HTTP_201_CREATED)


class QuotaViewSet(_Base):
    """Limits per organization (staff set them; defaults from the plan) and per project (owner/admin)."""

    serializer_class = s.QuotaOutput
    filterset_class = filters.QuotaFilter

    def get_queryset(self):
        return selectors.quota_list_visible_to(self.request.user)

    @extend_schema(request=s.QuotaCreateInput, responses={201: s.QuotaOutput})
    def create(self, request):
        data = self._input(s.QuotaCreateInput)
        project = data.pop("project")
        quota = services.quota_create(actor=request.user, project=project, **data)
        return self._out(quota, status.HTTP_201_CREATED)

    @extend_schema(request=s.QuotaUpdateInput, responses={200: s.QuotaOutput})
    def partial_update(self, request, pk=None):
        quota = self.get_object()
        services.quota_authorize(actor=request.user, quota=quota)  # before the body is read
        quota = services.quota_update(actor=request.user, quota=quota, **self._input(s.QuotaUpdateInput))
        return self._out(quota)

    @extend_schema(responses={204: OpenApiResponse(description="Removed: the scope falls back to its default.")})
    def destroy(self, request, pk=None):
        services.quota_delete(actor=request.user, quota=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class SignupViewSet(viewsets.GenericViewSet):
    """Self sign-up with e-mail verification; 404 unless `SIGNUP_ENABLED` is set (off by default)."""

    serializer_class = s.SignupAccepted
    permission_classes = [AllowAny]
    authentication_classes: list = []

    @extend_schema(request=s.SignupRequestInput, responses={202: s.SignupAccepted})
    def create(self, request):
        data = s.SignupRequestInput(data=request.data)
        validated(data)
        services.signup_request(**data.validated_data)
        return Response({"detail": "If the address can sign up, a verification e-mail is on its way."},
                        status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=s.SignupCompleteInput, responses={201: s.MembershipOutput, **problems({
        410: "signup_expired: the verification link has expired; sign up again."})})
    @action(detail=False, methods=["post"], serializer_class=s.MembershipOutput)
    def verify(self, request):
        data = s.SignupCompleteInput(data=request.data)
        validated(data)
        membership = services.signup_complete(**data.validated_data)
        return Response(s.MembershipOutput(membership).data, status=status.HTTP_201_CREATED)
