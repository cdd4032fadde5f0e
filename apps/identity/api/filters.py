"""FilterSets of the identity API. References resolve among what the caller can see (apps.core.references)."""
import django_filters

from apps.core.filters import BooleanFilter, FilterSet
from apps.core.references import VisibleFilter
from apps.tenancy.selectors import organization_list_visible_to, project_list_visible_to

from ..models import ApiToken, ServiceAccount


class ApiTokenFilter(FilterSet):
    organization = VisibleFilter(organization_list_visible_to)
    project = VisibleFilter(project_list_visible_to)
    revoked = BooleanFilter(field_name="revoked_at", lookup_expr="isnull", exclude=True)
    user = django_filters.UUIDFilter(field_name="user_id", help_text="The holder's user id.")
    user_email = django_filters.CharFilter(field_name="user__email", lookup_expr="iexact",
                                           help_text="The holder's e-mail.")

    class Meta:
        model = ApiToken
        fields = ["scope", "organization", "project", "revoked", "user", "user_email"]


class ServiceAccountFilter(FilterSet):
    organization = VisibleFilter(organization_list_visible_to)

    class Meta:
        model = ServiceAccount
        fields = ["organization"]
