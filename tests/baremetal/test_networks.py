"""Bare metal in a tenant's InfiniBand partition: on deploy the host's physical HCA port GUIDs join the partition
(full members, through networking's partition members); on delete they leave it right after the undeploy, and the
delete waits until the fabric's subnet manager applied a partitions file without them before the host can serve
anyone else. Checked on the fabric's state: the partitions file OpenSM reads (OpenSmDriver on a temporary
directory, with a stand-in for OpenSM's parser as in tests/networking/test_ib_drift.py). The receipt lists the
GUIDs removed and the verification."""
from __future__ import annotations

import json
import re

import pytest

from apps.baremetal.models import ExitReceipt
from apps.compute.models import Instance
from apps.inventory.models import HcaPort, Host
from apps.networking import services as net
from apps.networking.drivers.opensm import OpenSmDriver
from apps.networking.models import IbPartitionMember
from apps.networking.services.reconcile import ib_fabric_reconcile
from apps.operations.models import Operation
from tests.scheduling import fleet

from .conftest import bm_body, bm_host, drive, enroll
from .test_instances_api import node  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


def _parser(text: str) -> tuple[bool, list[str]]:
    ok = text.startswith("#") and "Default=0x7fff" in text and text.rstrip().endswith(";")
    return ok, [] if ok else ["PARSE ERROR: stand-in"]


@pytest.fixture
def ib(world, bm_driver, settings, tmp_path):
    """Fabric `ib-bm` with a P_Key pool and an OpenSM subnet manager (its partitions file in tmp_path), tenant
    A's partition on it, and an enrolled bare-metal host cabled to it (4 rails)."""
    fabric = fleet.ib_fabric("ib-bm")
    net.pkey_pool_set(actor=None, fabric=fabric, first_pkey=0x0100, last_pkey=0x01FF)
    part = net.ib_partition_create(actor=world.member_a, project=world.project_a, fabric=fabric, name="train")
    settings.NETWORKING_IB_FABRICS = {"ib-bm": {"driver": "opensm", "partitions_path": str(tmp_path / "p.conf"),
                                                "verify": False}}
    driver = OpenSmDriver(partitions_path=str(tmp_path / "p.conf"), validator=_parser)
    host = bm_host()
    _su, leaves = fleet.su_with_leaves("su-bm", rails=4, fabric=fabric)
    fleet.cable(host, leaves, fabric=fabric)
    _node_id, op = enroll(world.staff_client, host)
    assert op.status == "succeeded"
    guids = sorted(HcaPort.objects.filter(host=host).values_list("port_guid", flat=True))
    return type("Ib", (), dict(fabric=fabric, part=part, driver=driver, host=host, guids=guids))


def _in_partitions_file(ib) -> set[str]:
    """The GUIDs the partitions file gives the tenant's P_Key (what OpenSM enforces)."""
    ib_fabric_reconcile(fabric_id=ib.fabric.pk, driver=ib.driver, verify=False)
    text = ib.driver.path.read_text()
    (line,) = [s for s in text.split(";") if f"={ib.part.pkey:#06x}" in s] or [""]
    return set(re.findall(r"0x[0-9a-f]{16}", line.split(":", 1)[1] if ":" in line else ""))


def test_hca_guids_join_the_partition_on_deploy_and_leave_it_verified_on_the_fabric(world, bm_flavor, ib):
    resp = world.client_a.post("/api/v1/instances/", bm_body(world, bm_flavor, ib_partition_id=str(ib.part.pk)),
                               format="json")
    assert resp.status_code == 202, resp.content
    inst_id = resp.data["instance"]["id"]
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    assert Instance.objects.get(pk=inst_id).host_id == ib.host.pk
    assert sorted(IbPartitionMember.objects.filter(instance_id=inst_id, partition=ib.part)
                  .values_list("guid", "membership")) == [(g, "full") for g in ib.guids]
    assert _in_partitions_file(ib) == set(ib.guids)  # the subnet manager's file gives the host the tenant's P_Key
    shown = world.client_a.get(f"/api/v1/instances/{inst_id}/").json()["ib_partitions"]
    assert [m["guid"] for m in shown[0]["members"]] == ib.guids

    resp = world.client_a.delete(f"/api/v1/instances/{inst_id}/")
    assert resp.status_code == 202
    op_id = resp.data["operation"]["id"]
    op = drive(op_id, max_steps=8)  # the GUIDs left; the subnet manager has not applied it yet: the delete waits
    assert (op.status, op.step) == ("running", "verify_fabric")
    assert not IbPartitionMember.objects.filter(instance_id=inst_id).exists()
    assert Host.objects.get(pk=ib.host.pk).state == "maintenance"  # nobody is placed on it meanwhile

    assert _in_partitions_file(ib) == set()  # the reconcile applied a file without them
    assert drive(op_id).status == "succeeded"
    assert Host.objects.get(pk=ib.host.pk).state == "available"
    steps = json.loads(ExitReceipt.objects.get(instance_id=inst_id).payload)["steps"]
    detached = next(s for s in steps if s["step"] == "tenant_networks_detached")
    assert (detached["result"], detached["how"]) == ("succeeded", "executed")
    assert detached["pkey_members_removed"] == [{"fabric": "ib-bm", "pkey": f"{ib.part.pkey:#06x}", "guid": g}
                                                for g in ib.guids]
    (verified,) = [s for s in steps if s["step"] == "pkey_removal_verified"]
    assert (verified["fabric"], verified["result"], verified["how"]) == ("ib-bm", "succeeded", "executed")
    assert verified["finished_at"] >= detached["finished_at"]


def test_a_fabric_without_a_subnet_manager_is_recorded_unverified(world, bm_flavor, ib, settings):
    settings.NETWORKING_IB_FABRICS = {}
    resp = world.client_a.post("/api/v1/instances/", bm_body(world, bm_flavor, ib_partition_id=str(ib.part.pk)),
                               format="json")
    inst_id = resp.data["instance"]["id"]
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    resp = world.client_a.delete(f"/api/v1/instances/{inst_id}/")
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    steps = json.loads(ExitReceipt.objects.get(instance_id=inst_id).payload)["steps"]
    (verified,) = [s for s in steps if s["step"] == "pkey_removal_verified"]
    assert (verified["result"], verified["how"]) == (
        "unknown", "unverified: fabric ib-bm has no subnet manager configured (NETWORKING_IB_FABRICS)")


def test_a_removal_the_subnet_manager_never_applies_holds_the_node(world, bm_flavor, ib, settings):
    settings.BAREMETAL_FABRIC_VERIFY_S = 0.0
    resp = world.client_a.post("/api/v1/instances/", bm_body(world, bm_flavor, ib_partition_id=str(ib.part.pk)),
                               format="json")
    inst_id = resp.data["instance"]["id"]
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    resp = world.client_a.delete(f"/api/v1/instances/{inst_id}/")
    assert drive(resp.data["operation"]["id"]).status == "succeeded"  # the tenant's delete completes
    steps = json.loads(ExitReceipt.objects.get(instance_id=inst_id).payload)["steps"]
    (verified,) = [s for s in steps if s["step"] == "pkey_removal_verified"]
    assert verified["result"] == "failed" and "not applied within 0 s" in verified["detail"]
    assert ib.host.baremetal_node.__class__.objects.get(host=ib.host).held_reason.startswith(
        "bare-metal: P_Key removal not applied")
    assert Host.objects.get(pk=ib.host.pk).state == "maintenance"
    assert Operation.objects.filter(kind="baremetal.instance.delete", status="succeeded").count() == 1


@pytest.fixture
def vpc(world, node):  # noqa: F811
    """Tenant A's VPC and subnet; the node's host NIC cabled to the Ethernet fabric `eth-tenant`."""
    from apps.inventory.models import Fabric, Nic, Region

    eth = Fabric.objects.create(name="eth-tenant", kind="ethernet", region=Region.objects.get_or_create(name="r1")[0])
    Nic.objects.filter(host=node.host).update(fabric=eth, mac_address="52:54:00:bb:00:01")  # a unicast MAC
    v = net.vpc_create(actor=world.member_a, project=world.project_a, name="main", cidr="10.10.0.0/16")
    subnet = net.subnet_create(actor=world.member_a, vpc=v, name="nodes", cidr="10.10.1.0/24")
    return type("Vpc", (), dict(vpc=v, subnet=subnet, nic=Nic.objects.get(host=node.host)))


def _switch(subnet):
    from apps.networking.desired import ovn_topology, switch_name

    (sw,) = [s for s in ovn_topology(gateway_chassis="gw-1").switches if s.name == switch_name(subnet.pk)]
    return {p.name: p for p in sw.ports}


def test_the_hosts_nic_joins_the_subnet_through_a_localnet_port_with_the_subnets_vlan(
        world, bm_flavor, node, vpc):  # noqa: F811
    from apps.networking.desired import localnet_name, lsp_name
    from apps.networking.models import Port, Subnet

    resp = world.client_a.post("/api/v1/instances/", bm_body(world, bm_flavor, subnet_id=str(vpc.subnet.pk)),
                               format="json")
    assert resp.status_code == 202, resp.content
    inst_id = resp.data["instance"]["id"]
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    port = Port.objects.get(instance_id=inst_id)
    assert (port.mac_address, port.physical_network, port.security_groups.count()) == (
        vpc.nic.mac_address, "eth-tenant", 0)
    assert Subnet.objects.get(pk=vpc.subnet.pk).baremetal_vlan == 100  # the first of the default range
    lsps = _switch(vpc.subnet)
    ln = lsps[localnet_name(vpc.subnet.pk, "eth-tenant")]
    assert (ln.type, ln.options, ln.tag_request, ln.addresses) == (
        "localnet", (("network_name", "eth-tenant"),), 100, ("unknown",))
    server = lsps[lsp_name(port.pk)]
    assert server.type == "external" and server.addresses[0].startswith(f"{vpc.nic.mac_address} 10.10.1.")
    shown = world.client_a.get(f"/api/v1/instances/{inst_id}/").json()["ports"]
    assert [p["mac_address"] for p in shown] == [vpc.nic.mac_address]

    resp = world.client_a.delete(f"/api/v1/instances/{inst_id}/")
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    assert not Port.objects.filter(instance_id=inst_id).exists()
    assert localnet_name(vpc.subnet.pk, "eth-tenant") not in _switch(vpc.subnet)  # no server left on it


def test_security_groups_are_refused_for_bare_metal(world, bm_flavor, node, vpc):  # noqa: F811
    from apps.compute.models import Instance

    sg = net.security_group_create(actor=world.member_a, vpc=vpc.vpc, name="ssh")
    resp = world.client_a.post("/api/v1/instances/", bm_body(
        world, bm_flavor, subnet_id=str(vpc.subnet.pk), security_group_ids=[str(sg.pk)]), format="json")
    assert (resp.status_code, resp.data["code"]) == (400, "baremetal_network_unsupported")
    assert resp.data["errors"]["security_group_ids"] == ["not for a bare-metal flavor"]
    assert not Instance.objects.exists()
