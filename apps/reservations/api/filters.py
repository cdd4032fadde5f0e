import django_filters

from apps.core.filters import FilterSet, IsoDateTimeFilter, NameContainsFilter
from apps.core.references import VisibleFilter
from apps.tenancy.selectors import project_list_visible_to

from ..models import Lease, QueuedRequest
from ..states import LeaseStatus, QueueStatus


class LeaseFilter(FilterSet):
    """`since`/`until`: leases whose window ``[start, end)`` overlaps ``[since, until)`` (a calendar's range)."""

    name_contains = NameContainsFilter()
    project = VisibleFilter(project_list_visible_to)
    since = IsoDateTimeFilter(field_name="end", lookup_expr="gt")
    until = IsoDateTimeFilter(field_name="start", lookup_expr="lt")
    status = django_filters.ChoiceFilter(choices=LeaseStatus.choices)
    kind = django_filters.CharFilter(help_text="hosts | gpus | mig | shares")

    class Meta:
        model = Lease
        fields = ["project", "status", "kind", "gpu_model", "name", "since", "until", "name_contains"]


class QueuedRequestFilter(FilterSet):
    project = VisibleFilter(project_list_visible_to)
    instance = VisibleFilter("apps.compute.selectors.instance_list_visible_to", field_name="instance_id")
    status = django_filters.ChoiceFilter(choices=QueueStatus.choices)

    class Meta:
        model = QueuedRequest
        fields = ["project", "instance", "status"]
