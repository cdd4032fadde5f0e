import django_filters

from apps.core.filters import FilterSet
from apps.core.references import VisibleFilter
from apps.tenancy.selectors import project_list_visible_to

from ..models import HealthEvent, HealthEventImpact, Remediation, Repair
from ..states import EventKind, EventSource, RemediationStatus, RepairKind, RepairStatus


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


class StaffHealthEventFilter(FilterSet):
    """The staff event list's filters: the host by name (exact) or id, a GPU index on it, kind, classification
    (`class` of the rule that matched, exact), source and an observed-at range (inclusive from, exclusive to)."""

    host = django_filters.CharFilter(field_name="host__name")
    host_id = django_filters.UUIDFilter(field_name="host_id")
    gpu_index = django_filters.NumberFilter(field_name="gpu__index")
    kind = django_filters.ChoiceFilter(choices=EventKind.choices)
    classification = django_filters.CharFilter()
    source = django_filters.ChoiceFilter(choices=EventSource.choices)
    observed_after = django_filters.IsoDateTimeFilter(field_name="observed_at", lookup_expr="gte")
    observed_before = django_filters.IsoDateTimeFilter(field_name="observed_at", lookup_expr="lt")

    class Meta:
        model = HealthEvent
        fields = ["host", "host_id", "gpu_index", "kind", "classification", "source", "observed_after",
                  "observed_before"]
