"""Guest NUMA topology follows the GPUs' host NUMA nodes: checked in the XML that the create defines on libvirt's
test driver, for 1-, 2-, 4- and 8-GPU flavors on a 2-socket HGX host (2 x 56 cores, SMT 2, 1 TiB per node; GPUs
0-3 on node 0, 4-7 on node 1)."""
from __future__ import annotations

import shutil
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from apps.compute.drivers.base import DomainSpec, NumaCell
from apps.compute.drivers.libvirt.connection import drop_connection
from apps.compute.drivers.libvirt.xml import domain_xml
from apps.compute.models import Flavor, Instance
from apps.compute.services.hypervisor import driver_for_host, forget_drivers
from apps.core.drivers import DriverError
from tests.drivers.contract.conftest import qemu_embed_uri  # noqa: F401  (session fixture)
from tests.drivers.contract.test_libvirt_schema import _guest_node_of

from .conftest import create_body, drive, gpu_host

pytestmark = pytest.mark.django_db

NODE0_EMU, NODE1_EMU = "0,112", "56,168"
NODE0_CPUS, NODE1_CPUS = "1-55,113-167", "57-111,169-223"


@pytest.fixture
def libvirt_host(settings, tmp_path, monkeypatch):
    monkeypatch.setenv("COMPUTE_SEED_DIR", str(tmp_path / "seeds"))
    settings.DRIVERS = {"compute": "apps.compute.drivers.libvirt:LibvirtDriver"}
    forget_drivers()
    node = tmp_path / "node.xml"
    shutil.copy(Path(__file__).parents[1] / "drivers" / "contract" / "data" / "gpu-node.xml", node)
    uri = f"test://{node}"
    host = gpu_host(uri=uri, gpus=8, numa_split=4, memory_mib=2 * 1024 * 1024, nvswitch="")
    host.cpu_sockets, host.cpu_cores, host.cpu_threads = 2, 112, 224
    host.save(update_fields=["cpu_sockets", "cpu_cores", "cpu_threads"])
    yield host
    drop_connection(uri)
    forget_drivers()


def _create(world, host, gpus: int, vcpus: int, gib: int, hugepages: bool = False):
    flavor = Flavor.objects.create(name=f"numa-g{gpus}-{vcpus}", vcpus=vcpus, memory_mib=gib * 1024, disk_gib=100,
                                   gpu_form="gpu", gpu_model="H100-SXM5-80GB", gpu_count=gpus, hugepages=hugepages)
    resp = world.client_a.post("/api/v1/instances/", create_body(world, flavor), format="json")
    assert resp.status_code == 202, resp.content
    op = drive(resp.data["operation"]["id"], max_steps=200)
    return op, Instance.objects.get(pk=resp.data["instance"]["id"])


def _mib(cell: ET.Element) -> int:
    """A cell's memory in MiB (libvirt writes it back in KiB)."""
    return int(cell.get("memory")) // {"KiB": 1024, "MiB": 1}[cell.get("unit", "KiB")]


def _layout(root: ET.Element) -> dict:
    return {
        "cells": [(c.get("cpus"), _mib(c)) for c in root.iterfind("cpu/numa/cell")],
        "memnodes": [(m.get("cellid"), m.get("mode"), m.get("nodeset")) for m in root.iterfind("numatune/memnode")],
        "memory": root.find("numatune/memory").get("nodeset"),
        "pins": sorted({p.get("cpuset") for p in root.iterfind("cputune/vcpupin")}),
        "npins": len(root.findall("cputune/vcpupin")),
        "emulator": root.find("cputune/emulatorpin").get("cpuset"),
        "hugepages": root.find("memoryBacking/hugepages/page") is not None,
    }


@pytest.mark.parametrize("gpus,vcpus,gib,hugepages,expected", [
    (1, 26, 240, False, {"cells": [("0-25", 240 * 1024)], "memnodes": [("0", "strict", "0")],
                         "memory": "0", "pins": [NODE0_CPUS], "npins": 26, "emulator": NODE0_EMU,
                         "hugepages": False}),
    (2, 52, 480, True, {"cells": [("0-51", 480 * 1024)], "memnodes": [("0", "strict", "0")],
                        "memory": "0", "pins": [NODE0_CPUS], "npins": 52, "emulator": NODE0_EMU,
                        "hugepages": True}),
    (4, 104, 960, True, {"cells": [("0-103", 960 * 1024)], "memnodes": [("0", "strict", "0")],
                         "memory": "0", "pins": [NODE0_CPUS], "npins": 104, "emulator": NODE0_EMU,
                         "hugepages": True}),
    (8, 208, 1920, True, {"cells": [("0-103", 960 * 1024), ("104-207", 960 * 1024)],
                          "memnodes": [("0", "strict", "0"), ("1", "strict", "1")], "memory": "0-1",
                          "pins": [NODE0_CPUS, NODE1_CPUS], "npins": 208, "emulator": "0,56,112,168",
                          "hugepages": True}),
])
def test_guest_numa_follows_the_gpus(world, libvirt_host, gpus, vcpus, gib, hugepages, expected):
    op, inst = _create(world, libvirt_host, gpus, vcpus, gib, hugepages)
    assert (op.status, op.error_detail) == ("succeeded", "")
    root = ET.fromstring(driver_for_host(libvirt_host).domain_xml_get(inst.pk))
    assert _layout(root) == expected
    assert len(root.findall("devices/hostdev")) == gpus
    # each guest node has a PCIe expander bus on it and its GPUs under it (GPU i is PCI bus i; 0-3 on node 0)
    assert [c.findtext("target/node") for c in root.iterfind("devices/controller[@model='pcie-expander-bus']")] == [
        str(i) for i in range(len(expected["cells"]))]
    assert _guest_node_of(root) == {f"0x{i:02x}": "0" if i < 4 else "1" for i in range(gpus)}
    if gpus == 8:  # each guest node's vCPUs sit on its own host node's cores
        pins = {p.get("vcpu"): p.get("cpuset") for p in root.iterfind("cputune/vcpupin")}
        assert (pins["0"], pins["103"], pins["104"], pins["207"]) == (NODE0_CPUS,) * 2 + (NODE1_CPUS,) * 2


def test_a_resize_lays_the_guest_nodes_out_again_for_the_new_flavor(world, libvirt_host):
    """Stopped and resized to more vCPUs and memory on the same GPU: the domain is defined again with one guest node
    holding all the new vCPUs and memory (the old flavor's layout no longer adds up: the resize failed)."""
    op, inst = _create(world, libvirt_host, 1, 26, 240)
    assert op.status == "succeeded"
    bigger = Flavor.objects.create(name="numa-g1-big", vcpus=52, memory_mib=480 * 1024, disk_gib=100,
                                   gpu_form="gpu", gpu_model="H100-SXM5-80GB", gpu_count=1)
    url = f"/api/v1/instances/{inst.pk}"
    stop = world.client_a.post(f"{url}/stop/", {"hard": True}, format="json")
    assert drive(stop.data["operation"]["id"]).status == "succeeded"
    resize = world.client_a.post(f"{url}/resize/", {"flavor": str(bigger.pk)}, format="json")
    assert resize.status_code == 202, resize.content
    done = drive(resize.data["operation"]["id"])
    assert (done.status, done.error_detail) == ("succeeded", "")
    root = ET.fromstring(driver_for_host(libvirt_host).domain_xml_get(inst.pk))
    assert _layout(root)["cells"] == [("0-51", 480 * 1024)] and _layout(root)["npins"] == 52


def test_a_flavor_too_big_for_one_node_gets_gpus_on_both_nodes(world, libvirt_host):
    """4 GPUs would fit on node 0, whose 1 TiB cannot hold 1.5 TiB: placement takes two GPUs on each node of this
    PCIe host (no NVSwitch partitions), so each guest node needs 768 GiB of its host node's 1 TiB (the old code
    took GPUs 0-3 and the create failed at the host with numa_memory_exceeded)."""
    op, inst = _create(world, libvirt_host, 4, 64, 1536)
    assert (op.status, op.error_detail) == ("succeeded", "")
    layout = _layout(ET.fromstring(driver_for_host(libvirt_host).domain_xml_get(inst.pk)))
    assert layout["cells"] == [("0-31", 768 * 1024), ("32-63", 768 * 1024)]
    assert layout["memnodes"] == [("0", "strict", "0"), ("1", "strict", "1")]


def _refused(world, gpus: int, vcpus: int, gib: int):
    flavor = Flavor.objects.create(name=f"numa-no-g{gpus}-{vcpus}-{gib}", vcpus=vcpus, memory_mib=gib * 1024,
                                   disk_gib=100, gpu_form="gpu", gpu_model="H100-SXM5-80GB", gpu_count=gpus)
    before = Instance.objects.count()
    resp = world.client_a.post("/api/v1/instances/", create_body(world, flavor), format="json")
    assert Instance.objects.count() == before  # nothing written
    return resp


@pytest.mark.parametrize("gpus,vcpus,gib,words", [
    (1, 16, 1536, "memory"),  # one GPU, one guest node: 1.5 TiB on a 1 TiB node (the host has 2 TiB)
    (1, 150, 256, "vCPUs"),  # 150 vCPUs pinned to a 112-thread node (the host has 224)
])
def test_a_flavor_no_gpu_node_can_hold_is_refused_up_front(world, libvirt_host, gpus, vcpus, gib, words):
    """The host as a whole has room, its GPUs' NUMA nodes have not: 422 `unplaceable` naming `numa_capacity` before
    anything is made (the old code answered 202 and the create failed at the host)."""
    resp = _refused(world, gpus, vcpus, gib)
    assert resp.status_code == 422, resp.content
    body = resp.json()
    assert (body["code"], body["reason"]) == ("unplaceable", "numa_capacity")
    assert "NUMA" in body["detail"]


def test_an_nvswitch_partition_on_one_node_is_refused_when_the_node_is_too_small(world, libvirt_host):
    """On an HGX host the 4-GPU NVSwitch partitions are GPUs 1-4 (node 0) and 5-8 (node 1): 1.5 TiB on four GPUs
    needs one 1 TiB node to hold it, so no partition fits and the create is refused."""
    libvirt_host.nvswitch_system = "hgx-h100-8gpu"
    libvirt_host.save(update_fields=["nvswitch_system"])
    resp = _refused(world, 4, 64, 1536)
    assert resp.status_code == 422, resp.content
    assert resp.json()["reason"] == "numa_capacity"


def test_a_resize_beyond_the_gpus_node_is_refused_and_nothing_changes(world, libvirt_host):
    """A stopped 1-GPU instance resized to 1.5 TiB (its GPU's node has 1 TiB): 409 `flavor_does_not_fit` at once,
    the flavor and the ledger stay (the old code answered 202 and the resize failed at the host)."""
    from apps.scheduling.models import Allocation

    op, inst = _create(world, libvirt_host, 1, 26, 240)
    assert op.status == "succeeded"
    huge = Flavor.objects.create(name="numa-g1-huge", vcpus=26, memory_mib=1536 * 1024, disk_gib=100,
                                 gpu_form="gpu", gpu_model="H100-SXM5-80GB", gpu_count=1)
    url = f"/api/v1/instances/{inst.pk}"
    assert drive(world.client_a.post(f"{url}/stop/", {"hard": True}, format="json").data["operation"]["id"]
                 ).status == "succeeded"
    rows = sorted(Allocation.objects.filter(consumer_id=inst.pk).values_list("resource_class", "amount"))
    resp = world.client_a.post(f"{url}/resize/", {"flavor": str(huge.pk)}, format="json")
    assert resp.status_code == 409, resp.content
    assert resp.json()["code"] == "flavor_does_not_fit" and "NUMA" in resp.json()["detail"]
    inst.refresh_from_db()
    assert (inst.flavor.name, inst.status) == ("numa-g1-26", "stopped")
    assert sorted(Allocation.objects.filter(consumer_id=inst.pk).values_list("resource_class", "amount")) == rows


def test_cells_must_add_up():
    with pytest.raises(DriverError) as exc:
        domain_xml(DomainSpec(uuid=uuid.uuid4(), vcpus=4, memory_mib=4096,
                              numa_cells=(NumaCell(0, (0, 1), (1, 2), 2048),)))
    assert exc.value.code == "invalid_numa_cells"


def test_the_agents_reported_numa_map_decides_the_pinning(world, libvirt_host):
    """A host whose kernel numbers CPUs round-robin over the sockets (even CPUs on node 0): the agent's report
    (`observed.host.numa`), not the derived numbering, decides the pins; the emulator gets each node's first core."""
    node0 = [[c, c + 8] for c in (0, 2, 4, 6)]
    node1 = [[c, c + 8] for c in (1, 3, 5, 7)]
    libvirt_host.observed = {"host": {"numa": [
        {"node": 0, "cpus": sorted(sum(node0, [])), "cores": node0, "memory_mib": 65536},
        {"node": 1, "cpus": sorted(sum(node1, [])), "cores": node1, "memory_mib": 65536}]}}
    libvirt_host.save(update_fields=["observed"])
    op, inst = _create(world, libvirt_host, 8, 8, 64, hugepages=True)
    assert (op.status, op.error_detail) == ("succeeded", "")
    layout = _layout(ET.fromstring(driver_for_host(libvirt_host).domain_xml_get(inst.pk)))
    assert layout["cells"] == [("0-3", 32 * 1024), ("4-7", 32 * 1024)]
    assert layout["pins"] == ["2,4,6,10,12,14", "3,5,7,11,13,15"]
    assert layout["emulator"] == "0-1,8-9"


@pytest.mark.slow
def test_two_node_guest_reaches_the_firmware_on_qemu(qemu_embed_uri, tmp_path):  # noqa: F811
    """The product's XML for a two-node guest, scaled to this 2-core, 1-node machine by a test-only layout (both
    guest nodes on host node 0, vCPUs on CPU 1, the emulator on CPU 0), with a PCIe expander bus on each guest
    node, starts under TCG and OVMF writes to the serial log. The full 2-socket layout is checked in the XML tests above."""
    from apps.compute.drivers.libvirt import LibvirtDriver

    if not any(Path("/usr/share/qemu/firmware").glob("*edk2-x86_64*.json")):
        pytest.skip("no OVMF firmware descriptor (Debian package ovmf)")
    drv = LibvirtDriver(qemu_embed_uri, seed_dir=str(tmp_path))
    spec = DomainSpec(uuid=uuid.uuid4(), vcpus=2, memory_mib=512, virt_type="qemu", uefi=True,
                      numa_cells=(NumaCell(0, (0,), (1,), 256), NumaCell(0, (1,), (1,), 256)), emulator_cpuset=(0,))
    drv.domain_define(spec)
    try:
        drv.domain_start(spec.uuid)
        live = ET.fromstring(drv.domain_xml_get(spec.uuid))
        assert [c.get("cpus") for c in live.iterfind("cpu/numa/cell")] == ["0", "1"]
        # a PCIe expander bus (QEMU pxb-pcie) on each guest node, as GPU VMs get them
        assert [c.findtext("target/node") for c in live.iterfind(
            "devices/controller[@model='pcie-expander-bus']")] == ["0", "1"]
        log, deadline = "", time.monotonic() + 90
        while "BdsDxe" not in log and time.monotonic() < deadline:
            time.sleep(0.5)
            log = drv.console_log(spec.uuid)
        assert "BdsDxe" in log
    finally:
        drv.domain_delete(spec.uuid)
