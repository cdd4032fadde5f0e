import django_filters

from ..models import Cluster, Flavor, Image, Instance, SshKey
from ..states import ClusterStatus, GpuForm, InstanceStatus


class FlavorFilter(django_filters.FilterSet):
    gpu_form = django_filters.ChoiceFilter(choices=GpuForm.choices)

    class Meta:
        model = Flavor
        fields = ["name", "gpu_form", "gpu_model", "mig_profile", "vgpu_type"]


class ImageFilter(django_filters.FilterSet):
    class Meta:
        model = Image
        fields = ["name", "os", "arch"]


class SshKeyFilter(django_filters.FilterSet):
    class Meta:
        model = SshKey
        fields = ["project", "name", "fingerprint"]


class InstanceFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=InstanceStatus.choices)

    class Meta:
        model = Instance
        fields = ["project", "name", "status", "flavor", "cluster"]


class ClusterFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=ClusterStatus.choices)

    class Meta:
        model = Cluster
        fields = ["project", "name", "status"]
