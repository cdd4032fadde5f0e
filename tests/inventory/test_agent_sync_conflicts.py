"""Agent inventory reports that contradict the fleet record are a 409 problem, never a 500, and change nothing."""
import pytest

from apps.core.errors import Conflict
from apps.inventory.models import HcaPort
from apps.inventory.services.agent import host_inventory_sync
from tests.inventory.helpers import make_host


@pytest.mark.django_db
def test_reported_hca_guid_recorded_on_another_host_is_a_conflict():
    a = make_host("hosta", hca=1)
    b = make_host("hostb", hca=1)
    taken = HcaPort.objects.get(host=a).port_guid
    report = {"hca_ports": [{"device": "mlx5_0", "port_number": 1, "port_guid": taken, "lid": 7}]}
    with pytest.raises(Conflict) as err:
        host_inventory_sync(host=b, inventory=report)
    assert err.value.code == "hca_port_guid_conflict"
    assert err.value.status == 409
    assert HcaPort.objects.get(host=b).port_guid != taken


@pytest.mark.django_db
def test_reported_guid_for_the_same_port_updates_lid():
    a = make_host("hostc", hca=1)
    port = HcaPort.objects.get(host=a)
    host_inventory_sync(host=a, inventory={"hca_ports": [
        {"device": port.device, "port_number": port.port_number, "port_guid": port.port_guid, "lid": 42}]})
    port.refresh_from_db()
    assert port.lid == 42
