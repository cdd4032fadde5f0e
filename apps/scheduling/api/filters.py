import django_filters

from ..models import Allocation


class AllocationFilter(django_filters.FilterSet):
    host = django_filters.UUIDFilter(field_name="host_id")
    consumer = django_filters.UUIDFilter(field_name="consumer_id")
    project = django_filters.UUIDFilter(field_name="project_id")
    gpu = django_filters.UUIDFilter(field_name="gpu_id")

    class Meta:
        model = Allocation
        fields = ["host", "consumer", "project", "gpu", "resource_class", "consumer_type", "spot"]
