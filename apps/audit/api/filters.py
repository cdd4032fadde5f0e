"""Filters of /audit-events: actor (id or e-mail), whether the actor is provider staff, action (exact or prefix
`project.`), target (type exact or an app's prefix `inventory.`, id), organization, project, time range.

Events outlive what they name, so ids here match the stored ids (plain UUID filters: any id the caller's events do
not carry, another tenant's or a random one, is an empty page; ADR 0010)."""
import django_filters
from django.db.models import Q

from apps.core.filters import BooleanFilter, FilterSet, IsoDateTimeFilter

from ..models import AuditEvent


class AuditEventFilter(FilterSet):
    actor = django_filters.CharFilter(method="filter_actor", help_text="User id or e-mail.")
    action = django_filters.CharFilter(method="filter_action",
                                       help_text="Exact action, or a prefix ending in '.' (e.g. project.).")
    actor_is_staff = BooleanFilter(
        help_text="true: changes made by provider staff; false: by tenants' users, tokens and the system.")
    target_type = django_filters.CharFilter(method="filter_target_type",
                                            help_text="app_label.model (tenancy.project), or an app's prefix "
                                                      "ending in '.' (inventory.).")
    target_id = django_filters.CharFilter()
    organization = django_filters.UUIDFilter(field_name="organization_id")
    project = django_filters.UUIDFilter(field_name="project_id")
    created_after = IsoDateTimeFilter(field_name="created_at", lookup_expr="gte",
                                      help_text="Inclusive start (ISO 8601).")
    created_before = IsoDateTimeFilter(field_name="created_at", lookup_expr="lt",
                                       help_text="Exclusive end (ISO 8601).")

    class Meta:
        model = AuditEvent
        fields = ["actor", "actor_is_staff", "action", "target_type", "target_id", "organization", "project", "created_after",
                  "created_before"]

    def filter_actor(self, queryset, name, value):
        if "@" in value:
            return queryset.filter(actor_email__iexact=value)
        try:
            import uuid

            return queryset.filter(Q(actor_id=uuid.UUID(value)))
        except ValueError:
            return queryset.none()

    def filter_action(self, queryset, name, value):
        if value.endswith("."):
            return queryset.filter(action__startswith=value)
        return queryset.filter(action=value)

    def filter_target_type(self, queryset, name, value):
        if value.endswith("."):
            return queryset.filter(target_type__startswith=value)
        return queryset.filter(target_type=value)
