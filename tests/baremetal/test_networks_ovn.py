"""A bare-metal server's NIC in a VPC on a real OVN (NB/SB and ovn-northd on unix sockets, tests/networking/
fabrics.py): the reconcile writes the subnet's localnet port with the subnet's VLAN id as `tag_request` and the
server's port as an `external` LSP with its NIC's MAC; both go when the instance is deleted (ADR 1212)."""
from __future__ import annotations

import pytest

from apps.networking.desired import localnet_name, lsp_name, switch_name
from apps.networking.models import Port
from apps.networking.services import reconcile
from tests.networking.fabrics import OvnCluster, require_ovn

from .conftest import bm_body, drive
from .test_instances_api import node  # noqa: F401  (fixture)
from .test_networks import vpc  # noqa: F401  (fixture)

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


@pytest.fixture
def ovn(settings):
    require_ovn()
    cluster = OvnCluster().start()
    settings.NETWORKING_OVN_NB_DB = cluster.nb
    yield cluster
    driver = reconcile._ovn_drivers.pop(cluster.nb, None)
    if driver is not None:
        driver.close()
    cluster.stop()


def test_localnet_port_with_the_vlan_and_the_servers_external_port_in_ovn(world, bm_flavor, node, vpc, ovn):  # noqa: F811
    resp = world.client_a.post("/api/v1/instances/", bm_body(world, bm_flavor, subnet_id=str(vpc.subnet.pk)),
                               format="json")
    inst_id = resp.data["instance"]["id"]
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    port = Port.objects.get(instance_id=inst_id)
    reconcile.ovn_reconcile()
    ln = localnet_name(vpc.subnet.pk, "eth-tenant")
    assert ln in ovn.nbctl("lsp-list", switch_name(vpc.subnet.pk))
    assert ovn.nbctl("lsp-get-type", ln).strip() == "localnet"
    assert ovn.nbctl("get", "Logical_Switch_Port", ln, "tag_request").strip() == "100"
    assert ovn.nbctl("get", "Logical_Switch_Port", ln, "options:network_name").strip().strip('"') == "eth-tenant"
    server = lsp_name(port.pk)
    assert ovn.nbctl("lsp-get-type", server).strip() == "external"
    assert vpc.nic.mac_address in ovn.nbctl("lsp-get-addresses", server)
    assert reconcile.ovn_reconcile()["commands"] == 0  # converged: tag_request read back equal

    resp = world.client_a.delete(f"/api/v1/instances/{inst_id}/")
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    reconcile.ovn_reconcile()
    listed = ovn.nbctl("lsp-list", switch_name(vpc.subnet.pk))
    assert ln not in listed and server not in listed
