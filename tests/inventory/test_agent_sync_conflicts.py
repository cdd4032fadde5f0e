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


@pytest.mark.django_db
def test_reported_hca_pci_function_and_sriov_vfs_are_recorded_and_a_vanished_vf_goes():
    """The agent's `hca_ports[].pci_address` and `vfs` (from sysfs, or the fake driver) become the port's PCI
    address and its `VirtualFunction` rows, as a GPU's VFs are; a staff `set_hca_vf_guid` names only those."""
    from gpucloud_agent.backends.fake import FakeBackend

    from apps.core.errors import ValidationFailed
    from apps.inventory.models import VirtualFunction
    from apps.inventory.services.agent import agent_command_enqueue

    a = make_host("hostv", hca=1)
    port = HcaPort.objects.get(host=a)
    reported = {**FakeBackend(vfs_per_hca=3).hca_ports()[0], "device": port.device, "port_guid": port.port_guid}
    host_inventory_sync(host=a, inventory={"hca_ports": [reported]})
    port.refresh_from_db()
    assert port.pci_address == "0000:1a:00.0"
    assert list(VirtualFunction.objects.filter(hca_port=port).order_by("index").values_list("index", "pci_address")) \
        == [(0, "0000:1a:00.1"), (1, "0000:1a:00.2"), (2, "0000:1a:00.3")]
    host_inventory_sync(host=a, inventory={"hca_ports": [{**reported, "vfs": reported["vfs"][:2]}]})
    assert VirtualFunction.objects.filter(hca_port=port).count() == 2
    cmd = agent_command_enqueue(actor=None, host=a, kind="set_hca_vf_guid",
                                payload={"device": port.device, "vf_index": 1, "guid": "0x0200000000000001"})
    assert cmd.payload == {"device": port.device, "vf_index": 1, "vf_address": "0000:1a:00.2",
                           "guid": "0x0200000000000001"}
    for bad in ({"device": port.device, "vf_index": 2, "guid": "0x02"}, {"device": port.device, "vf_index": 0,
                                                                          "guid": "nope"}):
        with pytest.raises(ValidationFailed) as err:
            agent_command_enqueue(actor=None, host=a, kind="set_hca_vf_guid", payload=bad)
        assert err.value.code == "agent_command_invalid"
