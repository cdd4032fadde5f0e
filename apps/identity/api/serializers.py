"""Input/Output serializers of the identity API. The token secret appears only in `ApiTokenCreated`."""
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.references import VisibleField
from apps.core.serializers import ModelSerializer, Serializer
from apps.tenancy.selectors import organization_list_visible_to, project_list_visible_to

from ..models import ApiToken, ServiceAccount, TokenScope, User
from ..selectors import service_account_list_visible_to


class ApiTokenOutput(ModelSerializer):
    binding = serializers.CharField(read_only=True, help_text="project | organization | staff")
    user_email = serializers.EmailField(source="user.email", read_only=True)

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "scope", "binding", "organization", "project", "user", "user_email",
                  "created_at", "expires_at", "last_used_at", "revoked_at", "parent"]
        read_only_fields = fields


class ApiTokenCreated(ApiTokenOutput):
    token = serializers.SerializerMethodField(
        help_text="The secret, shown only in this response; null in a replay of the create (Idempotency-Key), since "
                  "the secret is never stored.")

    class Meta(ApiTokenOutput.Meta):
        fields = [*ApiTokenOutput.Meta.fields, "token"]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_token(self, obj) -> str:
        return self.context["raw_token"]


def _enabled(service_accounts):
    return service_accounts.filter(disabled_at__isnull=True)


class ApiTokenCreateInput(Serializer):
    name = serializers.CharField(max_length=100)
    scope = serializers.ChoiceField(choices=TokenScope.choices, default=TokenScope.READ)
    project = VisibleField(project_list_visible_to, required=False, allow_null=True, default=None)
    organization = VisibleField(organization_list_visible_to, required=False, allow_null=True, default=None)
    staff = serializers.BooleanField(required=False, default=False)
    expires_at = serializers.DateTimeField(required=False, allow_null=True, default=None,
                                           help_text="Default 90 days from now, at most 366.")
    service_account = VisibleField(service_account_list_visible_to, narrow=_enabled, required=False,
                                   allow_null=True, default=None, help_text="Mint the token for this service account.")


class ServiceAccountOutput(ModelSerializer):
    user_email = serializers.EmailField(source="user.email", read_only=True)

    class Meta:
        model = ServiceAccount
        fields = ["id", "organization", "name", "description", "user", "user_email", "created_at", "disabled_at"]
        read_only_fields = fields


class ServiceAccountCreateInput(Serializer):
    organization = VisibleField(organization_list_visible_to)
    name = serializers.CharField(max_length=100)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    role = serializers.CharField(max_length=16, default="member", help_text="admin | billing | member | viewer")


class MembershipBrief(Serializer):
    organization = serializers.UUIDField()
    project = serializers.UUIDField(allow_null=True)
    role = serializers.CharField()


class MeOutput(ModelSerializer):
    memberships = serializers.SerializerMethodField()
    token = serializers.SerializerMethodField(help_text="The token of this request (prefix etc.), or null.")
    two_factor_enabled = serializers.SerializerMethodField()

    class Meta:
        model = User
        fields = ["id", "email", "full_name", "staff_role", "is_service_account", "date_joined", "memberships",
                  "token", "two_factor_enabled"]
        read_only_fields = fields

    @extend_schema_field(MembershipBrief(many=True))
    def get_memberships(self, obj):
        from apps.tenancy.models import Membership

        rows = Membership.objects.filter(user_id=obj.pk).values("organization", "project", "role")
        return MembershipBrief(rows, many=True).data

    @extend_schema_field(ApiTokenOutput(allow_null=True))
    def get_token(self, obj):
        token = getattr(obj, "api_token", None)
        return ApiTokenOutput(token).data if token is not None else None

    def get_two_factor_enabled(self, obj) -> bool:
        from django_otp.plugins.otp_totp.models import TOTPDevice

        return TOTPDevice.objects.filter(user_id=obj.pk, confirmed=True).exists()


class MeUpdateInput(Serializer):
    full_name = serializers.CharField(max_length=200, allow_blank=True)


class TotpEnrolmentOutput(Serializer):
    config_url = serializers.CharField(help_text="otpauth:// URI for an authenticator app (shown once).")


class TotpConfirmInput(Serializer):
    otp_token = serializers.CharField(max_length=16)


class TotpConfirmed(MeOutput):
    recovery_codes = serializers.SerializerMethodField(
        help_text="Ten one-time recovery codes, shown once: each signs in (or verifies a session) in place of a "
                  "TOTP code.")

    class Meta(MeOutput.Meta):
        fields = [*MeOutput.Meta.fields, "recovery_codes"]
        read_only_fields = fields

    def get_recovery_codes(self, obj) -> list[str]:
        return self.context["recovery_codes"]


class RecoveryCodesOutput(Serializer):
    recovery_codes = serializers.ListField(child=serializers.CharField(), help_text="Shown once.")


class OtpVerifyInput(Serializer):
    otp_token = serializers.CharField(max_length=32, help_text="A TOTP code or a recovery code.")


class TwoFactorResetInput(Serializer):
    reason = serializers.CharField(min_length=3, max_length=500,
                                   help_text="Why (kept in the audit event), e.g. a support ticket reference.")


class SessionOutput(Serializer):
    authenticated = serializers.BooleanField()
    email = serializers.EmailField(allow_null=True)
    two_factor_verified = serializers.BooleanField()
    sign_in_method = serializers.CharField(allow_null=True, help_text="password | sso, or null.")
    second_factor_needed = serializers.CharField(
        allow_null=True, help_text="null, otp_required (send a code to POST /session/otp) or two_factor_required "
                                   "(enrol with POST /me/totp).")
    csrf_token = serializers.CharField(help_text="Send back in the X-CSRFToken header on unsafe requests.")
    sso_login_url = serializers.CharField(
        allow_null=True, help_text="Where a browser starts single sign-on (OIDC), or null when it is not configured.")


class LoginInput(Serializer):
    email = serializers.EmailField()
    password = serializers.CharField(write_only=True)
    otp_token = serializers.CharField(required=False, allow_blank=True, default="", max_length=32,
                                      help_text="TOTP or recovery code; required when the user has a confirmed "
                                                "device.")
