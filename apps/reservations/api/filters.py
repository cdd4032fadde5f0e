import django_filters

from ..models import Lease, QueuedRequest
from ..states import LeaseStatus, QueueStatus


class LeaseFilter(django_filters.FilterSet):
    project = django_filters.UUIDFilter(field_name="project_id")
    status = django_filters.ChoiceFilter(choices=LeaseStatus.choices)
    kind = django_filters.CharFilter(help_text="hosts | gpus | mig | shares")

    class Meta:
        model = Lease
        fields = ["project", "status", "kind", "gpu_model", "name"]


class QueuedRequestFilter(django_filters.FilterSet):
    project = django_filters.UUIDFilter(field_name="project_id")
    instance = django_filters.UUIDFilter(field_name="instance_id")
    status = django_filters.ChoiceFilter(choices=QueueStatus.choices)

    class Meta:
        model = QueuedRequest
        fields = ["project", "instance", "status"]
