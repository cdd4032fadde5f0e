import django_filters

from apps.core.filters import FilterSet
from apps.core.references import VisibleFilter
from apps.inventory.selectors import gpu_list_visible_to, host_list_visible_to
from apps.tenancy.selectors import project_list_visible_to

from ..models import Allocation


class AllocationFilter(FilterSet):
    host = VisibleFilter(host_list_visible_to)
    consumer = django_filters.UUIDFilter(field_name="consumer_id", help_text="an instance's or a lease's id")
    project = VisibleFilter(project_list_visible_to)
    gpu = VisibleFilter(gpu_list_visible_to)

    class Meta:
        model = Allocation
        fields = ["host", "consumer", "project", "gpu", "resource_class", "consumer_type", "spot"]
