"""FilterSets with explicit fields for the staff inventory API."""
import django_filters as df

from apps.core.filters import BooleanFilter, FilterSet, IsoDateTimeFilter

from ..models import AgentCommand, Fabric, Gpu, HcaPort, Host, Incident, Rack, ScalableUnit, Switch, Zone


class ZoneFilter(FilterSet):
    region = df.CharFilter(field_name="region__name")

    class Meta:
        model = Zone
        fields = ["region"]


class ScalableUnitFilter(FilterSet):
    zone = df.CharFilter(field_name="zone__name")

    class Meta:
        model = ScalableUnit
        fields = ["zone"]


class RackFilter(FilterSet):
    zone = df.CharFilter(field_name="zone__name")
    scalable_unit = df.CharFilter(field_name="scalable_unit__name")

    class Meta:
        model = Rack
        fields = ["zone", "scalable_unit"]


class FabricFilter(FilterSet):
    class Meta:
        model = Fabric
        fields = ["kind"]


class SwitchFilter(FilterSet):
    fabric = df.CharFilter(field_name="fabric__name")
    zone = df.CharFilter(field_name="zone__name")
    scalable_unit = df.CharFilter(field_name="scalable_unit__name")

    class Meta:
        model = Switch
        fields = ["fabric", "role", "zone", "scalable_unit", "rail"]


class HostFilter(FilterSet):
    zone = df.CharFilter(field_name="zone__name")
    scalable_unit = df.CharFilter(field_name="scalable_unit__name")
    rack = df.CharFilter(field_name="rack__name")
    gpu_model = df.CharFilter(field_name="gpus__model", distinct=True)
    name = df.CharFilter(field_name="name")

    class Meta:
        model = Host
        fields = ["zone", "scalable_unit", "rack", "state", "provisioning_kind", "gpu_model", "name"]


class GpuFilter(FilterSet):
    host = df.CharFilter(field_name="host__name")
    zone = df.CharFilter(field_name="host__zone__name")

    class Meta:
        model = Gpu
        fields = ["host", "zone", "model", "mode", "health", "scrub_state"]


class HcaPortFilter(FilterSet):
    host = df.CharFilter(field_name="host__name")
    fabric = df.CharFilter(field_name="fabric__name")
    leaf_switch = df.CharFilter(field_name="leaf_switch__name")

    class Meta:
        model = HcaPort
        fields = ["host", "fabric", "rail", "leaf_switch", "port_guid"]


class IncidentFilter(FilterSet):
    host = df.CharFilter(field_name="host__name")
    open = BooleanFilter(field_name="end", lookup_expr="isnull")
    start_after = IsoDateTimeFilter(field_name="start", lookup_expr="gte")
    start_before = IsoDateTimeFilter(field_name="start", lookup_expr="lt")

    class Meta:
        model = Incident
        fields = ["host", "open", "provider_at_fault", "start_after", "start_before"]


class AgentCommandFilter(FilterSet):
    host = df.CharFilter(field_name="host__name")

    class Meta:
        model = AgentCommand
        fields = ["host", "kind", "status"]
