"""FilterSets of the tenancy API (explicit fields)."""
import django_filters

from ..models import Invitation, Membership, Organization, Project, Quota


class OrganizationFilter(django_filters.FilterSet):
    class Meta:
        model = Organization
        fields = ["slug", "plan"]


class ProjectFilter(django_filters.FilterSet):
    class Meta:
        model = Project
        fields = ["organization", "slug"]


class MembershipFilter(django_filters.FilterSet):
    user_email = django_filters.CharFilter(field_name="user__email", lookup_expr="iexact")
    scope = django_filters.ChoiceFilter(choices=[("organization", "organization"), ("project", "project")],
                                        method="filter_scope")

    class Meta:
        model = Membership
        fields = ["organization", "project", "role", "user_email", "scope"]

    def filter_scope(self, queryset, name, value):
        return queryset.filter(project__isnull=(value == "organization"))


class InvitationFilter(django_filters.FilterSet):
    class Meta:
        model = Invitation
        fields = ["organization", "project", "email"]


class QuotaFilter(django_filters.FilterSet):
    class Meta:
        model = Quota
        fields = ["organization", "project", "resource"]
