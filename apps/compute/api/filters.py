import django_filters

from apps.core.filters import FilterSet, NameContainsFilter
from apps.core.references import VisibleFilter
from apps.tenancy.selectors import project_list_visible_to

from ..models import Cluster, Flavor, Image, Instance, SshKey
from ..selectors import cluster_list_visible_to, flavor_list_visible_to
from ..states import ClusterStatus, GpuForm, InstanceStatus


class FlavorFilter(FilterSet):
    gpu_form = django_filters.ChoiceFilter(choices=GpuForm.choices)

    class Meta:
        model = Flavor
        fields = ["name", "gpu_form", "gpu_model", "mig_profile", "vgpu_type"]


class ImageFilter(FilterSet):
    class Meta:
        model = Image
        fields = ["name", "os", "arch"]


class SshKeyFilter(FilterSet):
    name_contains = NameContainsFilter()
    project = VisibleFilter(project_list_visible_to)

    class Meta:
        model = SshKey
        fields = ["project", "name", "fingerprint", "name_contains"]


class InstanceFilter(FilterSet):
    name_contains = NameContainsFilter()
    project = VisibleFilter(project_list_visible_to)
    flavor = VisibleFilter(flavor_list_visible_to)
    cluster = VisibleFilter(cluster_list_visible_to)
    status = django_filters.ChoiceFilter(choices=InstanceStatus.choices)

    class Meta:
        model = Instance
        fields = ["project", "name", "status", "flavor", "cluster", "name_contains"]


class ClusterFilter(FilterSet):
    name_contains = NameContainsFilter()
    project = VisibleFilter(project_list_visible_to)
    status = django_filters.ChoiceFilter(choices=ClusterStatus.choices)

    class Meta:
        model = Cluster
        fields = ["project", "name", "status", "name_contains"]
