"""FilterSet of the operations list. Ids are plain UUID filters: an id the caller cannot see filters to an empty
page, never to an error, so the filter is no existence oracle (as the tenancy filters)."""
import django_filters

from apps.core.filters import IsoDateTimeFilter

from ..models import Operation, OperationStatus


class OperationFilter(django_filters.FilterSet):
    status = django_filters.MultipleChoiceFilter(choices=OperationStatus.choices,
                                                 help_text="one or more of pending, running, succeeded, failed, "
                                                           "cancelled (repeat the parameter)")
    kind = django_filters.CharFilter(help_text="the action, e.g. instance.create")
    target_type = django_filters.CharFilter(help_text="the target's type, e.g. compute.instance")
    target_id = django_filters.UUIDFilter(help_text="the target's id")
    project = django_filters.UUIDFilter(field_name="project_id", help_text="the project's id")
    created_after = IsoDateTimeFilter(field_name="created_at", lookup_expr="gte",
                                      help_text="created at or after (ISO 8601)")
    created_before = IsoDateTimeFilter(field_name="created_at", lookup_expr="lt",
                                       help_text="created before (ISO 8601)")

    class Meta:
        model = Operation
        fields = ["status", "kind", "target_type", "target_id", "project", "created_after", "created_before"]
