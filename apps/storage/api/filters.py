import django_filters

from apps.compute.selectors import instance_list_visible_to
from apps.core.filters import BooleanFilter, FilterSet, NameContainsFilter
from apps.core.references import VisibleFilter
from apps.tenancy.selectors import project_list_visible_to

from ..models import Snapshot, Volume, VolumeType
from ..selectors import volume_list_visible_to, volume_type_list_visible_to
from ..states import SnapshotStatus, VolumeStatus


class VolumeTypeFilter(FilterSet):
    host_local = BooleanFilter()
    multi_attach = BooleanFilter()

    class Meta:
        model = VolumeType
        fields = ["name", "host_local", "multi_attach"]


class VolumeFilter(FilterSet):
    name_contains = NameContainsFilter()
    project = VisibleFilter(project_list_visible_to)
    volume_type = VisibleFilter(volume_type_list_visible_to)
    status = django_filters.ChoiceFilter(choices=VolumeStatus.choices)
    instance = VisibleFilter(instance_list_visible_to, field_name="attachments__instance",
                             help_text="volumes attached to this instance")

    class Meta:
        model = Volume
        fields = ["project", "name", "status", "volume_type", "instance", "name_contains"]


class SnapshotFilter(FilterSet):
    project = VisibleFilter(project_list_visible_to)
    volume = VisibleFilter(volume_list_visible_to)
    status = django_filters.ChoiceFilter(choices=SnapshotStatus.choices)

    class Meta:
        model = Snapshot
        fields = ["project", "name", "status", "volume"]
