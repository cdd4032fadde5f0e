"""FilterSets of the identity API. Ids are plain UUID filters (no existence oracle, see tenancy filters)."""
import django_filters

from ..models import ApiToken, ServiceAccount


class ApiTokenFilter(django_filters.FilterSet):
    organization = django_filters.UUIDFilter(field_name="organization_id")
    project = django_filters.UUIDFilter(field_name="project_id")
    revoked = django_filters.BooleanFilter(field_name="revoked_at", lookup_expr="isnull", exclude=True)
    user = django_filters.UUIDFilter(field_name="user_id", help_text="The holder's user id.")
    user_email = django_filters.CharFilter(field_name="user__email", lookup_expr="iexact",
                                           help_text="The holder's e-mail.")

    class Meta:
        model = ApiToken
        fields = ["scope", "organization", "project", "revoked", "user", "user_email"]


class ServiceAccountFilter(django_filters.FilterSet):
    organization = django_filters.UUIDFilter(field_name="organization_id")

    class Meta:
        model = ServiceAccount
        fields = ["organization"]
