"""UFM adapter contract against a server that follows UFM's published P_Key REST API (tests/networking/ufm_server.py)."""
import uuid

import pytest

from apps.core.drivers import DriverError
from apps.networking import services
from apps.networking.drivers.base import PartitionMemberSpec, PartitionSpec
from apps.networking.drivers.ufm import UfmDriver
from apps.networking.services.reconcile import ib_fabric_reconcile
from tests.networking.helpers import Tenant, host_with_hca, ib_fabric
from tests.networking.ufm_server import UfmContractServer

G1, G2, G3 = "0x0c42a10300aa0001", "0x0c42a10300aa0003", "0x0c42a10300aa0005"


@pytest.fixture
def ufm():
    with UfmContractServer() as server:
        yield server


def _driver(ufm, password="contract-test"):
    return UfmDriver(base_url=ufm.url, username="admin", password=password)


def test_apply_creates_updates_removes_and_is_idempotent(ufm):
    driver = _driver(ufm)
    spec = PartitionSpec("a-train", 0x0123, (PartitionMemberSpec(G1, "full"), PartitionMemberSpec(G2, "limited")),
                         ipoib=True, index0=True, mtu_code=5, rate_code=21, sl=3)
    first = driver.apply([spec])
    assert first.writes == 2                                       # create the key, add the GUIDs
    row = ufm.state.pkeys[0x0123]
    assert row["partition"] == "gpc-a-train" and row["index0"] and row["ip_over_ib"]
    assert row["qos"] == {"mtu_limit": 5, "service_level": 3, "rate_limit": 400}
    assert row["guids"] == {G1[2:]: "full", G2[2:]: "limited"}

    assert driver.apply([spec]).writes == 0                        # nothing differs: no write

    changed = PartitionSpec("a-train", 0x0123, (PartitionMemberSpec(G2, "full"), PartitionMemberSpec(G3, "full")),
                            ipoib=True, index0=True, mtu_code=5, rate_code=21, sl=3)
    assert driver.apply([changed]).writes == 2                     # remove G1; add G3 + make G2 full
    assert ufm.state.pkeys[0x0123]["guids"] == {G2[2:]: "full", G3[2:]: "full"}

    ufm.state.pkeys[0x0777] = {"partition": "operator-mgmt", "guids": {}, "ip_over_ib": True, "index0": False,
                               "qos": {}}
    assert driver.apply([]).writes == 1                            # ours deleted, the operator's kept
    assert set(ufm.state.pkeys) == {0x0777}


def test_bad_credentials_and_rejections_are_driver_errors(ufm):
    with pytest.raises(DriverError):
        _driver(ufm, password="wrong").apply([])
    driver = _driver(ufm)
    with pytest.raises(DriverError):                               # the server enforces the documented range
        driver._call("POST", "/ufmRest/resources/pkeys/add", {"pkey": "0x7fff"})


@pytest.mark.django_db
def test_reconcile_from_database_through_ufm(ufm, settings):
    settings.NETWORKING_IB_FABRICS = {"ib-ufm": {"driver": "ufm", "url": ufm.url, "username": "admin",
                                                 "password": "contract-test"}}
    fabric = ib_fabric("ib-ufm", pool=(0x0100, 0x01FF))
    t = Tenant("ufm-a")
    part = services.ib_partition_create(actor=t.user, project=t.project, fabric=fabric, name="train")
    host = host_with_hca(fabric, ports=2)
    inst = uuid.uuid4()
    services.ib_partition_join_whole_host(actor=t.user, partition=part, host=host, instance_id=inst)
    first = ib_fabric_reconcile(fabric_id=fabric.pk)
    assert first["writes"] == 2
    assert set(ufm.state.pkeys[part.pkey]["guids"]) == {p.port_guid[2:] for p in host.hca_ports.all()}
    assert ib_fabric_reconcile(fabric_id=fabric.pk)["writes"] == 0
    services.ib_partition_members_leave_instance(actor=t.user, instance_id=inst)
    ib_fabric_reconcile(fabric_id=fabric.pk)
    assert ufm.state.pkeys[part.pkey]["guids"] == {}
