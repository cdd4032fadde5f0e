"""FilterSets of the tenancy API (explicit fields).

Ids of organizations and projects are plain UUID filters, not model choices: a model-choice filter answers 400
for an id that does not exist and 200 for another tenant's id, which would reveal which ids exist.
"""
import django_filters

from ..models import Invitation, Membership, Organization, Project, Quota


class ScopedFilterSet(django_filters.FilterSet):
    organization = django_filters.UUIDFilter(field_name="organization_id")
    project = django_filters.UUIDFilter(field_name="project_id")


class OrganizationFilter(django_filters.FilterSet):
    class Meta:
        model = Organization
        fields = ["slug", "plan"]


class ProjectFilter(ScopedFilterSet):
    project = None

    class Meta:
        model = Project
        fields = ["organization", "slug"]


class MembershipFilter(ScopedFilterSet):
    user_email = django_filters.CharFilter(field_name="user__email", lookup_expr="iexact")
    scope = django_filters.ChoiceFilter(choices=[("organization", "organization"), ("project", "project")],
                                        method="filter_scope")

    class Meta:
        model = Membership
        fields = ["organization", "project", "role", "user_email", "scope"]

    def filter_scope(self, queryset, name, value):
        return queryset.filter(project__isnull=(value == "organization"))


class InvitationFilter(ScopedFilterSet):
    class Meta:
        model = Invitation
        fields = ["organization", "project", "email"]


class QuotaFilter(ScopedFilterSet):
    class Meta:
        model = Quota
        fields = ["organization", "project", "resource"]
