import django_filters

from apps.core.filters import FilterSet
from apps.core.references import VisibleFilter
from apps.tenancy.selectors import project_list_visible_to

from ..models import HealthEventImpact, Remediation, Repair
from ..states import EventKind, RemediationStatus, RepairKind, RepairStatus


class HealthEventFilter(FilterSet):
    project = VisibleFilter(project_list_visible_to)
    kind = django_filters.ChoiceFilter(field_name="event__kind", choices=EventKind.choices)
    observed_after = django_filters.IsoDateTimeFilter(field_name="event__observed_at", lookup_expr="gte")

    class Meta:
        model = HealthEventImpact
        fields = ["project", "resource_type", "resource_id", "kind", "observed_after"]


class RemediationFilter(FilterSet):
    project = VisibleFilter(project_list_visible_to)
    status = django_filters.ChoiceFilter(choices=RemediationStatus.choices)

    class Meta:
        model = Remediation
        fields = ["project", "resource_id", "status"]


class RepairFilter(FilterSet):
    host = django_filters.CharFilter(field_name="host__name")
    status = django_filters.ChoiceFilter(choices=RepairStatus.choices)
    kind = django_filters.ChoiceFilter(choices=RepairKind.choices)

    class Meta:
        model = Repair
        fields = ["host", "status", "kind"]
