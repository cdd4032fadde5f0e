import django_filters

from apps.core.filters import FilterSet
from apps.core.references import VisibleFilter
from apps.inventory.selectors import host_list_visible_to
from apps.tenancy.selectors import project_list_visible_to

from ..models import BaremetalNode, ExitReceipt


class NodeFilter(FilterSet):
    host = VisibleFilter(host_list_visible_to)

    class Meta:
        model = BaremetalNode
        fields = ["host", "provision_state", "maintenance"]


class ReceiptFilter(FilterSet):
    project = VisibleFilter(project_list_visible_to)
    instance = django_filters.UUIDFilter(field_name="instance_id", help_text="the deleted instance's id")

    class Meta:
        model = ExitReceipt
        fields = ["project", "instance"]
