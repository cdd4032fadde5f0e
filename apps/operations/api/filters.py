"""FilterSet of the operations list. Operations are history and outlive their targets, so ids are plain UUID
filters: any id the caller's operations do not carry (another tenant's or a random one) is an empty page, never an
error, so the filter is no existence oracle (ADR 0010)."""
import django_filters

from apps.core.filters import FilterSet, IsoDateTimeFilter

from ..models import Operation, OperationStatus


class OperationFilter(FilterSet):
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
