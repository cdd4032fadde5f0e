"""RDMA inside a VM that shares its host (ADR 0508): the VM's virtual GUID in the tenant's InfiniBand partition is
set on a free SR-IOV VF of the HCA port by the agent before define, the VF is a hostdev of the domain, and the
release clears it. Fake compute driver; the libvirt XML is built from the domain spec the driver got."""
# ruff: noqa: F811  (the `nets` fixture imported from test_networking_integration)
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from apps.compute.drivers.libvirt.xml import domain_xml
from apps.compute.models import Cluster, Flavor, Instance
from apps.compute.services.hypervisor import driver_for_host
from apps.inventory.models import AgentCommand, HcaPort, VirtualFunction
from apps.networking import services as net
from apps.networking.models import IbPartitionMember, VirtualGuid
from apps.operations.models import Operation
from tests.scheduling import fleet

from .conftest import create_body, drive, gpu_host
from .test_networking_integration import _finish_create, _finish_delete, _hgx_hosts, nets  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


def _mig_host(nets, vfs: int = 2):
    su, leaves = fleet.su_with_leaves("su-rdma", rails=2, fabric=nets.fabric)
    host = gpu_host(gpus=2, mode="mig", su=su)
    fleet.cable(host, leaves, fabric=nets.fabric, vfs=vfs)
    for g in host.gpus.all():  # the MIG-backed vGPU's own SR-IOV VFs
        VirtualFunction.objects.bulk_create([VirtualFunction(gpu=g, index=i, pci_address=f"0000:{0x20 + g.index:02x}"
                                                             f":00.{i + 4}") for i in range(2)])
    hca = {p.rail: p for p in HcaPort.objects.filter(host=host)}
    net.virtual_guid_pool_set(actor=None, hca_port=hca[0], first_guid="0x0200000000000000", size=4)
    net.virtual_guid_pool_set(actor=None, hca_port=hca[1], first_guid="0x0200000000000100", size=4)
    return host, hca


def _hca_hostdevs(inst: Instance) -> list[tuple[str, str, str]]:
    """(bus, slot, function) of the domain XML's PCI hostdevs on the HCAs' buses (0x80 + rail)."""
    spec = driver_for_host(inst.host).host.specs[inst.pk]
    return [(a.get("bus"), a.get("slot"), a.get("function")) for a in ET.fromstring(domain_xml(spec)).iterfind(
        "devices/hostdev[@type='pci']/source/address") if int(a.get("bus"), 16) >= 0x80]


def test_shared_vm_gets_a_vf_of_its_rails_hca_with_its_virtual_guid_set_before_define_and_cleared_after(world, nets):
    host, hca = _mig_host(nets)
    body = create_body(world, world.mig, subnet_id=str(nets.subnet.pk), ib_partition_id=str(nets.part.pk))
    r = world.client_a.post("/api/v1/instances/", body, format="json")
    assert r.status_code == 202, r.content
    op_id = r.data["operation"]["id"]
    inst = Instance.objects.get(pk=r.data["instance"]["id"])
    # the create waits for the agent to set the VF's GUID: nothing is defined before it reported
    drive(op_id)
    guid_cmd = AgentCommand.objects.get(host=host, kind="set_hca_vf_guid")
    assert guid_cmd.payload == {"device": "mlx5_0", "vf_index": 0, "vf_address": "0000:80:00.1",
                                "guid": "0x0200000000000000"}
    assert inst.pk not in driver_for_host(host).host.specs
    op = _finish_create(op_id, lambda: host)
    inst.refresh_from_db()
    assert (op.status, inst.status) == ("succeeded", "active"), (op.error_code, op.error_detail)
    (member,) = IbPartitionMember.objects.filter(instance_id=inst.pk)
    assert inst.devices["hca_vfs"] == [{"address": "0000:80:00.1", "device": "mlx5_0", "vf_index": 0,
                                        "guid": member.guid, "rail": 0}]
    # the libvirt XML has the VF (rail 0's HCA at bus 0x80, VF 0 at function 1) as a managed PCI hostdev
    assert _hca_hostdevs(inst) == [("0x80", "0x00", "0x1")]

    # staff cannot reset, retype or re-GUID a VF a VM holds (its vGPU's VF, its HCA VF): 409 vf_allocated
    gvf = inst.devices["vfs"][0]
    for kind, payload in (("reset_vf", {"gpu_index": gvf["gpu_index"], "vf_address": gvf["address"]}),
                          ("set_vf_vgpu_type", {"gpu_index": gvf["gpu_index"], "vf_address": gvf["address"],
                                                "vgpu_type": gvf["vgpu_type"]}),
                          ("set_hca_vf_guid", {"device": "mlx5_0", "vf_index": 0, "guid": "0x0"})):
        refused = world.staff_client.post("/api/v1/agent-commands/", {"host": str(host.pk), "kind": kind,
                                                                      "payload": payload}, format="json")
        assert refused.status_code == 409, (kind, refused.content)
        assert (refused.json()["code"], refused.json()["holders"]) == ("vf_allocated", [str(inst.pk)])

    # a second VM on the host gets the port's other VF and the pool's next GUID
    r2 = world.client_a.post("/api/v1/instances/", {**body, "name": "second"}, format="json")
    assert _finish_create(r2.data["operation"]["id"], lambda: host).status == "succeeded"
    second = Instance.objects.get(pk=r2.data["instance"]["id"])
    assert [(v["address"], v["guid"]) for v in second.devices["hca_vfs"]] == [("0000:80:00.2", "0x0200000000000001")]

    # the release clears the GUID on the VF and the GUID leaves the partition
    world.client_a.delete(f"/api/v1/instances/{inst.pk}/")
    assert _finish_delete(inst).status == "succeeded"
    clear = AgentCommand.objects.filter(host=host, kind="set_hca_vf_guid", payload__guid="0x0").get()
    assert (clear.payload["device"], clear.payload["vf_index"], clear.status) == ("mlx5_0", 0, "succeeded")
    assert not IbPartitionMember.objects.filter(instance_id=inst.pk).exists()
    assert VirtualGuid.objects.get(guid=member.guid).status == "releasing"
    # the VF is free again: staff may act on it
    freed = world.staff_client.post("/api/v1/agent-commands/", {"host": str(host.pk), "kind": "set_hca_vf_guid",
                                    "payload": {"device": "mlx5_0", "vf_index": 0, "guid": "0x0"}}, format="json")
    assert freed.status_code == 201, freed.content


def test_shared_host_whose_hcas_have_no_free_vf_is_refused_up_front(world, nets):
    """GUIDs are free but the HCA has no SR-IOV VF in inventory (SR-IOV off, or every VF held): the check and the
    create answer 409 with the placement reason, before anything is written."""
    from .test_networking_integration import _refused_and_nothing_written

    host, _ = _mig_host(nets, vfs=0)
    body = create_body(world, world.mig, ib_partition_id=str(nets.part.pk))
    doc = _refused_and_nothing_written(world, body, 409, "capacity_unavailable",
                                       "no free SR-IOV VF on its HCA ports on fabric ib-int")
    assert "no free SR-IOV VF on its HCA ports on fabric ib-int (1 host)" in doc["detail"]
    # one VF, held by a first VM: the second is refused the same way
    VirtualFunction.objects.create(hca_port=HcaPort.objects.get(host=host, rail=0), index=0,
                                   pci_address="0000:80:00.1")
    r = world.client_a.post("/api/v1/instances/", body, format="json")
    assert _finish_create(r.data["operation"]["id"], lambda: host).status == "succeeded"
    again = world.client_a.post("/api/v1/instances/", {**body, "name": "second"}, format="json")
    doc = again.json()
    assert (again.status_code, doc["code"], doc.get("reason") or doc.get("constraint")) == (
        409, "capacity_unavailable", "ib_partition")
    assert "no free SR-IOV VF on its HCA ports on fabric ib-int (1 host)" in doc["detail"]


def test_cluster_members_sharing_hosts_each_get_one_vf_per_rail_of_their_gpus(world, nets):
    from apps.tenancy.models import Quota

    Quota.objects.update_or_create(organization=world.org_a, project=None, resource="gpus", defaults={"limit": 16})
    hosts = _hgx_hosts(nets.fabric, 2)
    for h in hosts:
        for p in HcaPort.objects.filter(host=h):
            net.virtual_guid_pool_set(actor=None, hca_port=p, first_guid=f"0x03{h.pk.int % 2**32:08x}{p.rail:04x}00",
                                      size=4)
    h2 = Flavor.objects.create(name="h100-2x", vcpus=16, memory_mib=131072, gpu_form="gpu",
                               gpu_model="H100-SXM5-80GB", gpu_count=2)
    body = {"project": str(world.project_a.pk), "name": "train", "flavor": str(h2.pk), "image": str(world.image.pk),
            "size": 2, "ib_partition_id": str(nets.part.pk)}
    resp = world.client_a.post("/api/v1/clusters/", body, format="json")
    assert resp.status_code == 201, resp.content
    assert drive(Operation.objects.get(kind="cluster.create").pk).status == "succeeded"
    for op in Operation.objects.filter(kind="instance.create"):
        done = _finish_create(op.pk, lambda op=op: Instance.objects.get(pk=op.target_id).host)
        assert done.status == "succeeded", (done.error_code, done.error_detail)
    members = list(Cluster.objects.get(pk=resp.data["id"]).members.select_related("host"))
    assert len(members) == 2
    for m in members:
        rails = sorted(m.devices["placement"]["gpu_indexes"])
        joined = {x.guid for x in IbPartitionMember.objects.filter(instance_id=m.pk)}
        # one VF per rail of its GPUs, each on that rail's HCA with the member's GUID of that rail
        assert [v["rail"] for v in m.devices["hca_vfs"]] == rails and len(rails) == 2
        assert {v["guid"] for v in m.devices["hca_vfs"]} == joined
        assert [b for b, _, _ in _hca_hostdevs(m)] == [f"0x{0x80 + r:02x}" for r in rails]


@pytest.mark.slow
def test_shared_vms_vf_guid_lands_in_the_partition_opensm_runs_on_ibsim_and_leaves_with_the_vm(world, nets, settings):
    """ibsim + OpenSM on the test fabric (one leaf, the host's rail-0 HCA): the reconcile writes the partitions file
    with the VF's virtual GUID as a full member of the tenant's P_Key, OpenSM validates and loads it; after the
    delete the GUID is out of the file and free again. (ibsim simulates no vports, so the VF's own P_Key table is
    not readable; the physical port stays out of the tenant's key.)"""
    from apps.networking.services.reconcile import ib_fabric_reconcile
    from tests.networking.fabrics import require_ibsim, sim_config, start_sim

    require_ibsim()
    su, leaves = fleet.su_with_leaves("su-sim", rails=1, fabric=nets.fabric)
    host = gpu_host(gpus=2, mode="mig", su=su)
    fleet.cable(host, leaves, fabric=nets.fabric)
    HcaPort.objects.filter(host=host).update(leaf_port=1)
    port = HcaPort.objects.get(host=host)
    for g in host.gpus.all():
        VirtualFunction.objects.create(gpu=g, index=0, pci_address=f"0000:{0x20 + g.index:02x}:00.4")
    net.virtual_guid_pool_set(actor=None, hca_port=port, first_guid="0x0200000000000000", size=4)
    sim = start_sim(nets.fabric)
    try:
        settings.NETWORKING_IB_FABRICS = {nets.fabric.name: sim_config(sim)}
        body = create_body(world, world.mig, ib_partition_id=str(nets.part.pk))
        r = world.client_a.post("/api/v1/instances/", body, format="json")
        assert _finish_create(r.data["operation"]["id"], lambda: host).status == "succeeded"
        inst = Instance.objects.get(pk=r.data["instance"]["id"])
        (vf,) = inst.devices["hca_vfs"]
        assert vf["guid"] == "0x0200000000000000" and _hca_hostdevs(inst) == [("0x80", "0x00", "0x1")]
        result = ib_fabric_reconcile(fabric_id=nets.fabric.pk)
        assert (result["writes"], result["mismatches"]) == (1, {}), result
        text = sim.partitions_path.read_text()
        block = text.split(f"={nets.part.pkey:#06x}", 1)[1].split(";", 1)[0]  # the partition's members
        assert f"{vf['guid']}=full" in block and port.port_guid not in block, text

        world.client_a.delete(f"/api/v1/instances/{inst.pk}/")
        assert _finish_delete(inst).status == "succeeded"
        after = ib_fabric_reconcile(fabric_id=nets.fabric.pk)
        assert (after["writes"], after["mismatches"], after["freed_virtual_guids"]) == (1, {}, 1), after
        assert vf["guid"] not in sim.partitions_path.read_text()
        assert not VirtualGuid.objects.filter(guid=vf["guid"]).exists()
    finally:
        sim.cleanup()
