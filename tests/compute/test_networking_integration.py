"""Instances attached to tenant networks: a port in the subnet and InfiniBand partition membership, created in
the workflow step after the claim and removed on delete. The networking reconcile to real
OVN / ibsim is covered by networking's own tests; here the rows compute asks networking to write are checked,
with the fake compute driver."""
from __future__ import annotations

import ipaddress
import xml.etree.ElementTree as ET

import pytest

from apps.compute.drivers.libvirt.xml import domain_xml
from apps.compute.models import Cluster, Flavor, Instance
from apps.compute.services.hypervisor import driver_for_host
from apps.inventory.models import HcaPort, VirtualFunction
from apps.networking import services as net
from apps.networking.models import IbPartitionMember, IpAllocation, Port, VirtualGuid
from apps.operations.models import Operation
from apps.scheduling.models import Allocation
from tests.scheduling import fleet

from .conftest import create_body, drive, gpu_host
from .test_instance_lifecycle import _agent_complete, _live_allocations

pytestmark = pytest.mark.django_db


@pytest.fixture
def nets(world):
    """Tenant A's VPC, subnet, SSH group and partition on an InfiniBand fabric with a P_Key pool; tenant B's
    subnet and partition (for the foreign-object cases)."""
    fabric = fleet.ib_fabric("ib-int")
    net.pkey_pool_set(actor=None, fabric=fabric, first_pkey=0x0100, last_pkey=0x01FF)
    vpc = net.vpc_create(actor=world.member_a, project=world.project_a, name="main", cidr="10.10.0.0/16")
    subnet = net.subnet_create(actor=world.member_a, vpc=vpc, name="nodes", cidr="10.10.1.0/24")
    sg = net.security_group_create(actor=world.member_a, vpc=vpc, name="ssh")
    part = net.ib_partition_create(actor=world.member_a, project=world.project_a, fabric=fabric, name="train")
    vpc_b = net.vpc_create(actor=None, project=world.project_b, name="main", cidr="10.10.0.0/16")
    subnet_b = net.subnet_create(actor=None, vpc=vpc_b, name="nodes", cidr="10.10.1.0/24")
    part_b = net.ib_partition_create(actor=None, project=world.project_b, fabric=fabric, name="b")
    return type("Nets", (), dict(fabric=fabric, vpc=vpc, subnet=subnet, sg=sg, part=part, subnet_b=subnet_b,
                                 part_b=part_b))


def _hgx_hosts(fabric, n: int, vfs: int = 2):
    su, leaves = fleet.su_with_leaves("su-net", rails=8, fabric=fabric)
    hosts = [gpu_host(gpus=8, su=su) for _ in range(n)]
    for h in hosts:
        fleet.cable(h, leaves, fabric=fabric, vfs=vfs)
    return hosts


def _finish_create(op_id, host_of) -> Operation:
    """Drive an instance.create, answering the agent's commands (NVSwitch partition, MIG) as they come."""
    op = drive(op_id)
    for _ in range(3):
        if op.status != "running":
            break
        host = host_of()
        _agent_complete(host, host.agent_commands.filter(status="queued"), {"gi_id": 1, "health": "ok"})
        op = drive(op_id)
    return op


def _finish_delete(inst: Instance) -> Operation:
    op = Operation.objects.filter(kind="instance.delete", target_id=inst.pk).latest("created_at")
    drive(op.pk)
    _agent_complete(inst.host, inst.host.agent_commands.filter(status="queued"))
    return drive(op.pk)


def test_cluster_members_get_ports_and_their_hosts_hca_guids_join_the_pkey(world, nets):
    from apps.tenancy.models import Quota

    Quota.objects.update_or_create(organization=world.org_a, project=None, resource="gpus",
                                   defaults={"limit": 16})
    hosts = _hgx_hosts(nets.fabric, 3)
    h8 = Flavor.objects.create(name="h100-8x", vcpus=96, memory_mib=1024 * 512, gpu_form="gpu",
                               gpu_model="H100-SXM5-80GB", gpu_count=8)
    body = {"project": str(world.project_a.pk), "name": "train", "flavor": str(h8.pk), "image": str(world.image.pk),
            "size": 2, "subnet_id": str(nets.subnet.pk), "security_group_ids": [str(nets.sg.pk)],
            "ib_partition_id": str(nets.part.pk)}
    resp = world.client_a.post("/api/v1/clusters/", body, format="json")
    assert resp.status_code == 201, resp.content
    cluster = Cluster.objects.get(pk=resp.data["id"])
    assert drive(Operation.objects.get(kind="cluster.create").pk).status == "succeeded"
    for op in Operation.objects.filter(kind="instance.create"):
        assert _finish_create(op.pk, lambda op=op: Instance.objects.get(pk=op.target_id).host).status == "succeeded"

    members = list(cluster.members.select_related("host").order_by("name"))
    assert {m.host_id for m in members} <= {h.pk for h in hosts} and len({m.host_id for m in members}) == 2
    addresses = set()
    for m in members:
        assert m.status == "active"
        (port,) = Port.objects.filter(instance_id=m.pk)
        assert port.subnet_id == nets.subnet.pk and port.name == f"{m.name}-eth0"
        assert list(port.security_groups.all()) == [nets.sg]
        (ip,) = port.fixed_ips.values_list("address", flat=True)
        assert ipaddress.ip_address(ip) in ipaddress.ip_network("10.10.1.0/24") and ip != "10.10.1.1"
        addresses.add(ip)
        # the host's 8 physical HCA port GUIDs are full members of the tenant's P_Key, and nothing else of it
        guids = set(HcaPort.objects.filter(host=m.host, fabric=nets.fabric).values_list("port_guid", flat=True))
        assert len(guids) == 8
        joined = IbPartitionMember.objects.filter(instance_id=m.pk)
        assert {(x.guid, x.membership, x.partition_id, x.virtual_guid_id) for x in joined} == {
            (g, "full", nets.part.pk, None) for g in guids}
        # the domain has a NIC with the port's MAC; OVN's iface-id is the networking port name
        spec = driver_for_host(m.host).host.specs[m.pk]
        # RDMA inside the VM: the 8 HCA physical functions whose GUIDs joined the P_Key are hostdevs beside the
        # 8 GPUs, in rail order, in the libvirt XML
        hca = list(HcaPort.objects.filter(host=m.host, fabric=nets.fabric).order_by("rail")
                   .values_list("pci_address", flat=True))
        assert [h.address for h in spec.hostdevs][8:] == hca and len(spec.hostdevs) == 16
        buses = [a.get("bus") for a in ET.fromstring(domain_xml(spec)).iterfind(
            "devices/hostdev[@type='pci']/source/address")]
        assert buses[8:] == [f"0x{0x80 + r:02x}" for r in range(8)]
        assert [(n.mac_address, n.port_id, n.iface_id) for n in spec.interfaces] == [
            (port.mac_address, port.pk, f"gpc-p-{port.pk.hex}")]
        assert port.mac_address in spec.seed.network_config
        # the API shows the port, its address and the partition membership
        out = world.client_a.get(f"/api/v1/instances/{m.pk}/").json()
        assert [(p["id"], p["fixed_ips"]) for p in out["ports"]] == [(str(port.pk), [ip])]
        assert out["network"] == {"subnet": str(nets.subnet.pk), "security_groups": [str(nets.sg.pk)],
                                  "ib_partition": str(nets.part.pk)}
        (part_out,) = out["ib_partitions"]
        assert (part_out["id"], part_out["pkey"]) == (str(nets.part.pk), nets.part.pkey)
        assert {x["guid"] for x in part_out["members"]} == guids
        assert all(x["membership"] == "full" and not x["virtual"] for x in part_out["members"])
    assert len(addresses) == 2
    listed = world.client_a.get("/api/v1/instances/").json()["results"]
    assert all(len(i["ports"]) == 1 and len(i["ib_partitions"]) == 1 for i in listed)

    # retrying the attach step (a worker died after it) makes nothing twice
    from apps.compute.services.networks import instance_networks_attach

    instance_networks_attach(actor=world.member_a, instance=Instance.objects.select_related("flavor", "host").get(
        pk=members[0].pk))
    assert Port.objects.filter(instance_id=members[0].pk).count() == 1
    assert IbPartitionMember.objects.filter(instance_id=members[0].pk).count() == 8

    assert world.client_a.delete(f"/api/v1/clusters/{cluster.pk}/").status_code == 202
    for m in members:
        assert _finish_delete(m).status == "succeeded"
    cluster.refresh_from_db()
    assert cluster.status == "deleted"
    ids = [m.pk for m in members]
    assert not Port.objects.filter(instance_id__in=ids).exists()
    assert not IpAllocation.objects.filter(subnet=nets.subnet).exists()
    assert not IbPartitionMember.objects.filter(partition=nets.part).exists()
    assert all(_live_allocations(i) == [] for i in ids)
    # delete is idempotent: the networks are gone once, and a second detach finds nothing
    from apps.compute.services.networks import instance_networks_detach

    instance_networks_detach(actor=None, instance_id=ids[0])


@pytest.mark.parametrize("field, value", [
    ("subnet_id", "foreign"),
    ("subnet_id", "00000000-0000-0000-0000-000000000001"),
    ("ib_partition_id", "foreign"),
    ("ib_partition_id", "00000000-0000-0000-0000-000000000001"),
    ("security_group_ids", "foreign"),
])
@pytest.mark.parametrize("collection", ["instances", "clusters"])
def test_bad_or_foreign_network_is_400_not_found_and_nothing_is_allocated(world, nets, field, value, collection):
    """Another tenant's network and one that does not exist are the same answer (ADR 0010)."""
    gpu_host(gpus=8)
    if value == "foreign":
        value = {"subnet_id": str(nets.subnet_b.pk), "ib_partition_id": str(nets.part_b.pk),
                 "security_group_ids": [str(nets.subnet_b.vpc.security_groups.get(is_default=True).pk)]}[field]
    body = create_body(world, world.gpu1, **{"subnet_id": str(nets.subnet.pk), field: value})
    if collection == "clusters":
        body["size"] = 2
    before_ports = Port.objects.count()
    r = world.client_a.post(f"/api/v1/{collection}/", body, format="json")
    assert r.status_code == 400, r.content
    assert r["Content-Type"] == "application/problem+json"
    assert (r.json()["code"], r.json()["errors"]) == ("validation_error", {field: ["Not found."]})
    assert Instance.objects.count() == 0 and Cluster.objects.count() == 0 and Operation.objects.count() == 0
    assert Allocation.objects.count() == 0 and Port.objects.count() == before_ports
    assert not IbPartitionMember.objects.exists()


def test_security_group_of_another_vpc_is_400(world, nets):
    other = net.vpc_create(actor=world.member_a, project=world.project_a, name="other", cidr="10.20.0.0/16")
    sg = other.security_groups.get(is_default=True)
    r = world.client_a.post("/api/v1/instances/", create_body(
        world, world.cpu, subnet_id=str(nets.subnet.pk), security_group_ids=[str(sg.pk)]), format="json")
    assert (r.status_code, r.json()["code"]) == (400, "invalid_security_group")
    assert Instance.objects.count() == 0


def test_default_security_group_and_no_partition(world, nets):
    gpu_host(gpus=8)
    r = world.client_a.post("/api/v1/instances/", create_body(world, world.cpu, subnet_id=str(nets.subnet.pk)),
                            format="json")
    assert drive(r.data["operation"]["id"]).status == "succeeded"
    (port,) = Port.objects.filter(instance_id=r.data["instance"]["id"])
    assert [g.is_default for g in port.security_groups.all()] == [True]
    assert not IbPartitionMember.objects.exists()


def test_shared_host_mig_vm_joins_with_a_virtual_guid_of_its_gpus_rail(world, nets):
    su, leaves = fleet.su_with_leaves("su-mig", rails=2, fabric=nets.fabric)
    host = gpu_host(gpus=2, mode="mig", su=su)
    fleet.cable(host, leaves, fabric=nets.fabric)
    gpu = host.gpus.get(index=0)
    VirtualFunction.objects.bulk_create([VirtualFunction(gpu=gpu, index=i, pci_address=f"0000:00:00.{i + 4}")
                                         for i in range(2)])
    hca = {p.rail: p for p in HcaPort.objects.filter(host=host)}
    net.virtual_guid_pool_set(actor=None, hca_port=hca[0], first_guid="0x0200000000000000", size=4)
    net.virtual_guid_pool_set(actor=None, hca_port=hca[1], first_guid="0x0200000000000100", size=4)
    r = world.client_a.post("/api/v1/instances/", create_body(
        world, world.mig, subnet_id=str(nets.subnet.pk), ib_partition_id=str(nets.part.pk)), format="json")
    assert r.status_code == 202, r.content
    op = _finish_create(r.data["operation"]["id"], lambda: host)
    inst = Instance.objects.get(pk=r.data["instance"]["id"])
    assert (op.status, inst.status) == ("succeeded", "active"), (op.error_code, op.error_detail)
    (member,) = IbPartitionMember.objects.filter(instance_id=inst.pk)
    # GPU 0 is on rail 0: the VF's virtual GUID comes from rail 0's HCA port pool; the physical GUIDs stay out
    assert (member.guid, member.membership, member.hca_port_id) == ("0x0200000000000000", "full", None)
    assert member.virtual_guid.pool.hca_port_id == hca[0].pk
    assert not IbPartitionMember.objects.filter(guid__in=[p.port_guid for p in hca.values()]).exists()
    out = world.client_a.get(f"/api/v1/instances/{inst.pk}/").json()
    assert out["ib_partitions"][0]["members"] == [{"guid": "0x0200000000000000", "membership": "full",
                                                   "virtual": True}]

    world.client_a.delete(f"/api/v1/instances/{inst.pk}/")
    assert _finish_delete(inst).status == "succeeded"
    assert not IbPartitionMember.objects.exists() and not Port.objects.filter(instance_id=inst.pk).exists()
    assert VirtualGuid.objects.get(guid="0x0200000000000000").status == "releasing"  # reused after the SM applied


def _refused_and_nothing_written(world, body, status: int, code: str, reason: str):
    """The check and the create both refuse `body` with `code` and the placement reason ``ib_partition``; the
    create writes nothing. Returns the create's problem document."""
    before_ports = Port.objects.count()
    checked = world.client_a.post("/api/v1/instances/check/", body, format="json")
    assert checked.status_code == 200, checked.content
    answer = checked.json()
    assert (answer["placeable"], answer["code"], answer["reason"]) == (False, code, "ib_partition")
    r = world.client_a.post("/api/v1/instances/", body, format="json")
    assert r.status_code == status, r.content
    assert r["Content-Type"] == "application/problem+json"
    doc = r.json()
    assert doc["code"] == code and (doc.get("reason") or doc.get("constraint")) == "ib_partition"
    (ib,) = [f for f in doc["explanation"]["filters"] if f["filter"] == "ib_partition"]
    assert ib["reasons"] == {reason: ib["removed"]} and ib["removed"] >= 1
    assert "partition train on fabric ib-int" in ib["note"]
    assert Instance.objects.count() == 0 and Operation.objects.count() == 0 and Allocation.objects.count() == 0
    assert Port.objects.count() == before_ports and not IbPartitionMember.objects.exists()
    assert not VirtualGuid.objects.exists()
    return doc


def test_shared_host_without_guid_pool_is_refused_at_create_and_check(world, nets):
    """A 1-GPU VM shares its HGX host: it needs a VF's virtual GUID, and no HCA port of the fabric has a pool,
    so the check and the create answer 409 now instead of a 202 and a create that fails at its attach step."""
    for host in _hgx_hosts(nets.fabric, 2):
        assert HcaPort.objects.filter(host=host, fabric=nets.fabric).count() == 8
    body = create_body(world, world.gpu1, subnet_id=str(nets.subnet.pk), ib_partition_id=str(nets.part.pk))
    doc = _refused_and_nothing_written(world, body, 409, "capacity_unavailable",
                                       "no virtual GUID pool on its HCA ports on fabric ib-int")
    assert doc["earliest_start"] is None
    assert doc["detail"].startswith("No capacity can hold the request now: no virtual GUID pool on "
                                    "its HCA ports on fabric ib-int (2 hosts); ")
    # without the partition the same VM fits
    del body["ib_partition_id"]
    assert world.client_a.post("/api/v1/instances/check/", body, format="json").json()["placeable"] is True


def test_shared_host_whose_pools_are_used_up_is_refused(world, nets):
    (host,) = _hgx_hosts(nets.fabric, 1)
    port = HcaPort.objects.get(host=host, rail=0)
    net.virtual_guid_pool_set(actor=None, hca_port=port, first_guid="0x0200000000000000", size=1)
    net.virtual_guid_allocate(hca_port=port, instance_id=None)  # its only GUID is taken (or still releasing)
    body = create_body(world, world.gpu1, ib_partition_id=str(nets.part.pk))
    before = VirtualGuid.objects.count()
    checked = world.client_a.post("/api/v1/instances/check/", body, format="json").json()
    assert (checked["code"], checked["reason"]) == ("capacity_unavailable", "ib_partition")
    (ib,) = [f for f in checked["explanation"]["filters"] if f["filter"] == "ib_partition"]
    assert ib["reasons"] == {"no free virtual GUID in its HCA ports' pools on fabric ib-int": 1}
    r = world.client_a.post("/api/v1/instances/", body, format="json")
    assert (r.status_code, r.json()["code"]) == (409, "capacity_unavailable")
    assert Instance.objects.count() == 0 and VirtualGuid.objects.count() == before


def test_mig_vm_on_hosts_without_hca_ports_is_unplaceable(world, nets):
    """MIG hosts not cabled to the partition's fabric can never give a VM a GUID there: 422, not a 202. The
    HGX host that is cabled has no MIG VFs, and the device step removes it after the partition's filter; the
    refusal still names the partition, whose filter removed every host that could hold the flavor."""
    host = gpu_host(gpus=2, mode="mig")
    VirtualFunction.objects.bulk_create([VirtualFunction(gpu=g, index=0, pci_address=f"0000:00:00.{g.index + 4}")
                                         for g in host.gpus.all()])
    _hgx_hosts(nets.fabric, 1)
    body = create_body(world, world.mig, ib_partition_id=str(nets.part.pk))
    doc = _refused_and_nothing_written(world, body, 422, "unplaceable", "no HCA port on fabric ib-int")
    assert doc["detail"].startswith("No capacity of this fleet could ever hold the request: "
                                    "no HCA port on fabric ib-int (1 host); ")
    assert "no HCA port on fabric ib-int (1 host)" in doc["detail"].split(" considered; ")[1]
    assert "ib_partition" not in doc["detail"]          # the filter's name is for scripts (`explanation`, `reason`)
    later = [f["filter"] for f in doc["explanation"]["filters"] if f["removed"]]
    assert later[-1] != "ib_partition"  # the last filter that removed hosts is not what the refusal names


def test_placement_takes_the_host_whose_hca_port_has_a_free_guid(world, nets):
    """Of three HGX hosts only the last has a virtual GUID pool: the VM lands there and joins the partition."""
    hosts = _hgx_hosts(nets.fabric, 3)
    port = HcaPort.objects.get(host=hosts[-1], rail=2)
    net.virtual_guid_pool_set(actor=None, hca_port=port, first_guid="0x0200000000000000", size=2)
    body = create_body(world, world.gpu1, ib_partition_id=str(nets.part.pk))
    assert world.client_a.post("/api/v1/instances/check/", body, format="json").json()["placeable"] is True
    r = world.client_a.post("/api/v1/instances/", body, format="json")
    assert r.status_code == 202, r.content
    op = _finish_create(r.data["operation"]["id"], lambda: hosts[-1])
    inst = Instance.objects.get(pk=r.data["instance"]["id"])
    assert (op.status, inst.status, inst.host_id) == ("succeeded", "active", hosts[-1].pk), op.error_detail
    # its GPU's rail has no pool: the VF comes from the host's port that has one
    (member,) = IbPartitionMember.objects.filter(instance_id=inst.pk)
    assert (member.guid, member.virtual_guid.pool.hca_port_id) == ("0x0200000000000000", port.pk)


def test_cluster_on_hosts_not_cabled_to_the_partition_fabric_is_unplaceable(world, nets):
    from apps.tenancy.models import Quota

    Quota.objects.update_or_create(organization=world.org_a, project=None, resource="gpus",
                                   defaults={"limit": 16})
    gpu_host(gpus=8)
    gpu_host(gpus=8)
    h8 = Flavor.objects.create(name="h100-8x", vcpus=96, memory_mib=1024 * 512, gpu_form="gpu",
                               gpu_model="H100-SXM5-80GB", gpu_count=8)
    body = {"project": str(world.project_a.pk), "name": "train", "flavor": str(h8.pk),
            "image": str(world.image.pk), "size": 2, "ib_partition_id": str(nets.part.pk)}
    checked = world.client_a.post("/api/v1/clusters/check/", body, format="json").json()
    assert (checked["code"], checked["reason"]) == ("unplaceable", "ib_partition")
    r = world.client_a.post("/api/v1/clusters/", body, format="json")
    assert (r.status_code, r.json()["code"], r.json()["reason"]) == (422, "unplaceable", "ib_partition")
    assert Cluster.objects.count() == 0 and Instance.objects.count() == 0 and Operation.objects.count() == 0


def test_domain_xml_has_the_ovs_interface():
    import uuid

    from apps.compute.drivers.base import DomainSpec, NetInterface
    from apps.compute.drivers.libvirt.xml import domain_xml

    pid = uuid.uuid4()
    spec = DomainSpec(uuid=uuid.uuid4(), vcpus=1, memory_mib=256, interfaces=(
        NetInterface(mac_address="0a:58:0a:0a:01:02", port_id=pid, iface_id=f"gpc-p-{pid.hex}"),))
    xml = domain_xml(spec)
    assert "<interface type=\"bridge\"><mac address=\"0a:58:0a:0a:01:02\" /><source bridge=\"br-int\" />" in xml
    assert f"<virtualport type=\"openvswitch\"><parameters interfaceid=\"{pid}\" /></virtualport>" in xml
    assert f"iface-id=\"gpc-p-{pid.hex}\"" in xml


def test_libvirt_hook_maps_taps_to_ovn_iface_ids():
    """The live XML (with the tap libvirt created) gives `ovs-vsctl set Interface vnetN iface-id=gpc-p-…`."""
    import io
    import uuid

    from apps.compute.drivers.base import DomainSpec, NetInterface
    from apps.compute.drivers.libvirt import ovn_hook
    from apps.compute.drivers.libvirt.xml import METADATA_NS, domain_xml

    assert ovn_hook.METADATA_NS == METADATA_NS
    pid, other = uuid.uuid4(), uuid.uuid4()
    spec = DomainSpec(uuid=uuid.uuid4(), vcpus=1, memory_mib=256, interfaces=(
        NetInterface(mac_address="0a:58:0a:0a:01:02", port_id=pid, iface_id=f"gpc-p-{pid.hex}"),
        NetInterface(mac_address="0a:58:0a:0a:01:03", port_id=other, iface_id=f"gpc-p-{other.hex}")))
    defined = domain_xml(spec)
    assert ovn_hook.iface_ids(defined) == []          # no tap before QEMU runs
    live = defined.replace('<model type="virtio" />', '<model type="virtio" /><target dev="vnet7" />', 1)
    assert ovn_hook.ovs_commands(ovn_hook.iface_ids(live)) == [
        ["ovs-vsctl", "--timeout=10", "set", "Interface", "vnet7", f"external_ids:iface-id=gpc-p-{pid.hex}"]]
    assert ovn_hook.main(["qemu", "dom", "prepare", "begin", "-"], io.StringIO(live)) == 0   # other stages: no-op


def test_demo_a_shared_hgx_vm_joins_demo_train_and_a_mig_vm_is_told_why_not(fake_driver):
    """`make run`'s demo data: a 1-GPU VM (`h100-1x`, sharing an HGX node of zone A) joins the demo partition with
    a VF's virtual GUID from the demo's pools; a MIG VM cannot (zone B is Ethernet only) and is refused up front."""
    import io

    from django.core.management import call_command

    from apps.networking.models import IbPartition, VirtualGuidPool
    from apps.tenancy.models import Project
    from tests.tenancy.helpers import client_for

    out = io.StringIO()
    call_command("demo_load", stdout=out)
    call_command("demo_load", stdout=io.StringIO())  # idempotent: no second pool, no error
    assert "512 virtual GUID pools on its HCA ports (512 new)" in out.getvalue()
    assert VirtualGuidPool.objects.count() == 512
    project = Project.objects.get(organization__slug="demo", slug="demo")
    token = io.StringIO()
    call_command("create_api_token", "--email", "demo@example.com", "--project", "demo/demo", "--scope", "write",
                 stdout=token)
    client = client_for(token.getvalue().strip().splitlines()[-1])
    part = IbPartition.objects.get(project=project, name="demo-train")
    image = client.get("/api/v1/images/?name=ubuntu-24-04").json()["results"][0]["id"]

    def body(flavor: str, name: str) -> dict:
        fid = client.get(f"/api/v1/flavors/?name={flavor}").json()["results"][0]["id"]
        return {"project": str(project.pk), "name": name, "flavor": fid, "image": image,
                "ib_partition_id": str(part.pk)}

    # the MIG hosts' SR-IOV VFs, as their demo agents report them at enrollment
    from apps.inventory.models import Gpu

    VirtualFunction.objects.bulk_create([
        VirtualFunction(gpu=g, index=i, pci_address=f"0000:{g.index + 0x20:02x}:00.{i + 1}")
        for g in Gpu.objects.filter(host__name__startswith="b-h100-mig-") for i in range(4)])
    # the HGX hosts' HCA SR-IOV VFs, as their demo agents report them (`demo_agents`: `max_vfs` per port)
    VirtualFunction.objects.bulk_create([
        VirtualFunction(hca_port=p, index=i, pci_address=f"{p.pci_address[:7]}:00.{i + 1}")
        for p in HcaPort.objects.exclude(pci_address="") for i in range(2)])
    demo_instances = list(Instance.objects.values_list("pk", flat=True))  # the demo's of its closed months
    mig = body("h100-mig-3g40", "mig-ib")
    without = {k: v for k, v in mig.items() if k != "ib_partition_id"}
    assert client.post("/api/v1/instances/check/", without, format="json").json()["placeable"] is True
    checked = client.post("/api/v1/instances/check/", mig, format="json").json()
    assert (checked["placeable"], checked["code"]) == (False, "unplaceable")
    r = client.post("/api/v1/instances/", mig, format="json")
    assert (r.status_code, r.json()["code"]) == (422, "unplaceable")
    # the MIG hosts (zone B) have no HCA port; the HGX hosts on the fabric (zone A) have no MIG VFs
    (ib,) = [f for f in r.json()["explanation"]["filters"] if f["filter"] == "ib_partition"]
    assert ib["reasons"] == {"no HCA port on fabric ib-compute": 2}
    assert "partition demo-train on fabric ib-compute" in ib["note"]
    # the headline is the partition's fabric, not the MIG VFs the HGX nodes lack (they cannot hold the flavor)
    assert (checked["reason"], r.json()["reason"]) == ("ib_partition", "ib_partition")
    assert r.json()["detail"].startswith("No capacity of this fleet could ever hold the request: "
                                         "no HCA port on fabric ib-compute (2 hosts); ")
    assert "no HCA port on fabric ib-compute (2 hosts)" in r.json()["detail"].split(" considered; ")[1]
    assert list(Instance.objects.values_list("pk", flat=True)) == demo_instances  # none created

    one = body("h100-1x", "one-ib")
    assert client.post("/api/v1/instances/check/", one, format="json").json()["placeable"] is True
    r = client.post("/api/v1/instances/", one, format="json")
    assert r.status_code == 202, r.content
    op = _finish_create(r.json()["operation"]["id"], lambda: Instance.objects.get(pk=r.json()["instance"]["id"]).host)
    inst = Instance.objects.get(pk=r.json()["instance"]["id"])
    assert (op.status, inst.status) == ("succeeded", "active"), (op.error_code, op.error_detail)
    (member,) = IbPartitionMember.objects.filter(instance_id=inst.pk)
    gpu_index = inst.devices["placement"]["gpu_indexes"][0]
    assert member.virtual_guid.pool.hca_port.rail == gpu_index and member.virtual_guid.pool.hca_port.host_id == \
        inst.host_id
