"""FilterSets of the tenancy API (explicit fields).

Organizations and projects resolve among those the caller can see: another tenant's id answers as an id that does
not exist (400 `validation_error`, "Not found.", apps.core.references).
"""
import django_filters
from django.db.models import Q

from apps.core.filters import FilterSet
from apps.core.references import VisibleFilter

from ..models import Invitation, Membership, Organization, OrgRole, Project, ProjectRole, Quota
from ..selectors import organization_list_visible_to, project_list_visible_to


class ScopedFilterSet(FilterSet):
    organization = VisibleFilter(organization_list_visible_to)
    project = VisibleFilter(project_list_visible_to)


class OrganizationFilter(FilterSet):
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
    role = django_filters.ChoiceFilter(choices=[(r, r) for r in dict.fromkeys([*OrgRole.values, *ProjectRole.values])])
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
    project = VisibleFilter(project_list_visible_to, method="filter_project",
                            help_text="the limits that apply to this project: its own and its organization's "
                                      "(narrow with `scope`)")
    scope = django_filters.ChoiceFilter(choices=[("organization", "organization"), ("project", "project")],
                                        method="filter_scope", help_text="organization- or project-level limits")

    class Meta:
        model = Quota
        fields = ["organization", "project", "resource", "scope"]

    def filter_project(self, queryset, name, value):
        return queryset.filter(Q(project=value) | Q(organization_id=value.organization_id, project__isnull=True))

    def filter_scope(self, queryset, name, value):
        return queryset.filter(project__isnull=(value == "organization"))
