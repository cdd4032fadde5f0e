from pathlib import Path

import pytest

from apps.inventory.fleet.sync import fleet_apply, fleet_plan
from apps.inventory.models import Fabric, Host
from apps.inventory.topology import fabric_topology

pytestmark = pytest.mark.django_db
SAMPLE = (Path(__file__).resolve().parents[2] / "apps/inventory/fleets/sample.yaml").read_text()


def test_distances_on_the_sample_superpod():
    fleet_apply(fleet_plan(SAMPLE))
    ids = dict(Host.objects.values_list("name", "id"))
    topo = fabric_topology(Fabric.objects.get(name="ib-compute").id)
    assert topo.distance(ids["a-su1-n01"], ids["a-su1-n01"]) == 0
    assert topo.distance(ids["a-su1-n01"], ids["a-su1-n32"]) == 1  # same SU: shares every rail leaf
    assert topo.distance(ids["a-su1-n01"], ids["a-su2-n01"]) == 2  # other SU: through the spine layer
    assert topo.distance(ids["a-su1-n01"], ids["b-h200-n01"]) is None  # zone B has no InfiniBand
    eth = fabric_topology(Fabric.objects.get(name="eth-tenant").id)
    assert eth.distance(ids["b-h200-n01"], ids["b-l40s-n08"]) == 1
    assert eth.distance(ids["a-su1-n01"], ids["b-l40s-n08"]) == 2
