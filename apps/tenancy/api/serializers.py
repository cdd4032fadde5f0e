"""Input/Output serializers of the tenancy API (no business logic: services validate the domain rules)."""
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.references import VisibleField
from apps.core.serializers import ModelSerializer, Serializer

from ..authz import organization_manageable, project_members_manageable, project_writable, quota_changeable
from ..models import Invitation, Membership, Organization, OrgRole, Project, ProjectRole, Quota
from ..quotas import fleet_capacity, quota_warnings, usage_of
from ..selectors import org_role_of, organization_list_visible_to, project_list_visible_to, project_role_of


def _caller(serializer):
    request = serializer.context.get("request")
    return getattr(request, "user", None)


class OrganizationOutput(ModelSerializer):
    billing_email = serializers.CharField(read_only=True, help_text='an e-mail address, or "" when none is set')
    role = serializers.SerializerMethodField(
        help_text="The caller's organization role (owner | admin | billing | member | viewer), or null (staff without "
                  "a membership, a project-only member, a project-bound token).")
    can_manage_members = serializers.SerializerMethodField(
        help_text="Whether the caller may invite to the organization, change or remove its members and revoke its "
                  "invitations (owner, admin): false for billing, member and viewer roles, a read-only token and "
                  "provider staff without a membership (docs/adr/0104).")

    class Meta:
        model = Organization
        fields = ["id", "slug", "name", "legal_name", "billing_email", "currency", "billing_timezone",
                  "default_sla_tier", "plan", "require_2fa", "role", "can_manage_members", "created_at", "updated_at"]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_role(self, obj) -> str | None:
        user = _caller(self)
        return org_role_of(user, obj) if user is not None else None

    def get_can_manage_members(self, obj) -> bool:
        user = _caller(self)
        return user is not None and organization_manageable(user, obj)


class OrganizationCreateInput(Serializer):
    slug = serializers.SlugField(max_length=63)
    name = serializers.CharField(max_length=200)
    owner_email = serializers.EmailField(help_text="Receives the owner invitation.")
    legal_name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    billing_email = serializers.EmailField(required=False, allow_blank=True)
    currency = serializers.CharField(max_length=3, required=False, help_text="ISO 4217, default USD.")
    billing_timezone = serializers.CharField(max_length=64, required=False, help_text="IANA name, default UTC.")
    default_sla_tier = serializers.CharField(max_length=32, required=False)
    plan = serializers.CharField(max_length=32, required=False, help_text="trial | default | enterprise")
    require_2fa = serializers.BooleanField(required=False)


class OrganizationUpdateInput(Serializer):
    name = serializers.CharField(max_length=200, required=False)
    legal_name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    billing_email = serializers.EmailField(required=False, allow_blank=True)
    currency = serializers.CharField(max_length=3, required=False)
    billing_timezone = serializers.CharField(max_length=64, required=False)
    default_sla_tier = serializers.CharField(max_length=32, required=False)
    plan = serializers.CharField(max_length=32, required=False)
    require_2fa = serializers.BooleanField(required=False)


class ProjectOutput(ModelSerializer):
    role = serializers.SerializerMethodField(
        help_text="The caller's effective project role (admin | member | viewer: the higher of the project "
                  "membership and the organization role), or null (staff without a membership).")
    can_write = serializers.SerializerMethodField(
        help_text="Whether the caller may create and change this project's resources (instances, SSH keys, "
                  "networks, leases): false for a viewer, a read-only token and provider staff without a "
                  "membership.")
    can_manage_members = serializers.SerializerMethodField(
        help_text="Whether the caller may invite to this project, change or remove its project memberships and "
                  "revoke its invitations: true for the project's admins (an organization owner or admin is one); "
                  "false for a project member or viewer, a read-only token and staff without a membership.")

    class Meta:
        model = Project
        fields = ["id", "organization", "slug", "name", "description", "role", "can_write", "can_manage_members",
                  "created_at", "updated_at"]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_role(self, obj) -> str | None:
        user = _caller(self)
        return project_role_of(user, obj) if user is not None else None

    def get_can_write(self, obj) -> bool:
        user = _caller(self)
        return user is not None and project_writable(user, obj)

    def get_can_manage_members(self, obj) -> bool:
        user = _caller(self)
        return user is not None and project_members_manageable(user, obj)


class ProjectCreateInput(Serializer):
    organization = VisibleField(organization_list_visible_to)
    slug = serializers.SlugField(max_length=63)
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")


class ProjectUpdateInput(Serializer):
    name = serializers.CharField(max_length=200, required=False)
    description = serializers.CharField(required=False, allow_blank=True)


class MembershipOutput(ModelSerializer):
    user_email = serializers.EmailField(source="user.email", read_only=True)
    user_is_service_account = serializers.BooleanField(source="user.is_service_account", read_only=True)
    scope = serializers.SerializerMethodField()

    class Meta:
        model = Membership
        fields = ["id", "organization", "project", "scope", "user", "user_email", "user_is_service_account",
                  "role", "created_at"]
        read_only_fields = fields

    def get_scope(self, obj) -> str:
        return "project" if obj.project_id else "organization"


ROLE_HELP = f"organization: {', '.join(OrgRole.values)}; project: {', '.join(ProjectRole.values)}"


class MembershipCreateInput(Serializer):
    organization = VisibleField(organization_list_visible_to)
    project = VisibleField(project_list_visible_to, required=False, allow_null=True, default=None)
    user_email = serializers.EmailField()
    role = serializers.CharField(max_length=16, help_text=ROLE_HELP)


class MembershipUpdateInput(Serializer):
    role = serializers.CharField(max_length=16, help_text=ROLE_HELP)


class InvitationOutput(ModelSerializer):
    status = serializers.CharField(read_only=True, help_text="pending | accepted | revoked | expired")

    class Meta:
        model = Invitation
        fields = ["id", "organization", "project", "email", "role", "status", "invited_by", "expires_at",
                  "accepted_at", "revoked_at", "created_at"]
        read_only_fields = fields


class InvitationCreateInput(Serializer):
    organization = VisibleField(organization_list_visible_to)
    project = VisibleField(project_list_visible_to, required=False, allow_null=True, default=None)
    email = serializers.EmailField()
    role = serializers.CharField(max_length=16, help_text=ROLE_HELP)


class InvitationAcceptInput(Serializer):
    token = serializers.CharField(help_text="The token of the e-mailed link.")
    password = serializers.CharField(required=False, allow_blank=True, write_only=True,
                                     help_text="For a new account (anonymous caller).")
    full_name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class QuotaWarning(Serializer):
    """A warning on a quota (not an error): what the whole fleet could place of the resource."""

    code = serializers.CharField(help_text="quota_above_fleet_capacity")
    resource = serializers.CharField()
    limit = serializers.IntegerField()
    placeable = serializers.IntegerField(help_text="the most of the resource the whole fleet could place")
    detail = serializers.CharField()


class QuotaOutput(ModelSerializer):
    scope = serializers.SerializerMethodField()
    usage = serializers.SerializerMethodField(help_text="Counted from what is really held; null if not counted.")
    warnings = serializers.SerializerMethodField(
        help_text="Not errors: e.g. quota_above_fleet_capacity when the limit is more than the whole fleet could "
                  "place (with `placeable`, the most it could).")

    allowed_actions = serializers.SerializerMethodField(
        help_text="What the caller may do to this quota now: update and delete, or nothing (billing admins and "
                  "support read quotas; operators change them; an organization's owners and admins change its "
                  "projects' limits).")

    class Meta:
        model = Quota
        fields = ["id", "organization", "project", "scope", "resource", "limit", "usage", "warnings",
                  "allowed_actions", "updated_at"]
        read_only_fields = fields

    def get_allowed_actions(self, obj) -> list[str]:
        request = self.context.get("request")
        actor = getattr(request, "user", None)
        return ["update", "delete"] if actor is not None and quota_changeable(actor, obj) else []

    def get_scope(self, obj) -> str:
        return "project" if obj.project_id else "organization"

    def get_usage(self, obj) -> int | None:
        return usage_of(organization=obj.organization, project=obj.project, resource=obj.resource)

    @extend_schema_field(QuotaWarning(many=True))
    def get_warnings(self, obj) -> list[dict]:
        # one snapshot of the fleet for every row of the answer (the context is shared by a list's rows)
        if "fleet_capacity" not in self.context:
            self.context["fleet_capacity"] = fleet_capacity()
        return quota_warnings(resource=obj.resource, limit=obj.limit, capacity=self.context["fleet_capacity"])


class QuotaCreateInput(Serializer):
    organization = VisibleField(organization_list_visible_to)
    project = VisibleField(project_list_visible_to, required=False, allow_null=True, default=None)
    resource = serializers.CharField(max_length=100, help_text="e.g. gpus, gpus:H100-SXM5-80GB, vcpus")
    limit = serializers.IntegerField(min_value=0)


class QuotaUpdateInput(Serializer):
    limit = serializers.IntegerField(min_value=0)



class SignupRequestInput(Serializer):
    email = serializers.EmailField()


class SignupCompleteInput(Serializer):
    token = serializers.CharField()
    password = serializers.CharField(write_only=True)
    organization_slug = serializers.SlugField(max_length=63)
    organization_name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    full_name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class SignupAccepted(Serializer):
    detail = serializers.CharField()
