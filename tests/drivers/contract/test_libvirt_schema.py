"""Device passthrough cannot run here (the kernel has no VFIO), so the hostdev, mdev and VF XML we build is
validated against libvirt's RNG schema (`VIR_DOMAIN_DEFINE_VALIDATE`) and round-tripped through the test
driver: what libvirt stores is what we asked for."""
from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET

import pytest

from apps.compute.drivers.base import (
    CloudInitSeed,
    DiskSpec,
    DomainSpec,
    MdevHostdev,
    NetInterface,
    NumaCell,
    PciHostdev,
)
from apps.compute.drivers.libvirt import LibvirtDriver
from apps.core.drivers import DriverError


@pytest.fixture
def driver(test_node_uri, tmp_path):
    return LibvirtDriver(test_node_uri, seed_dir=str(tmp_path))


def _gpu_spec(**kw) -> DomainSpec:
    base = dict(
        uuid=uuid.uuid4(), vcpus=4, memory_mib=16384, project_id="p1", numa_node=1, cpuset=(16, 17, 18, 19),
        dedicated_cpus=True,
        hugepages=True, machine="q35", uefi=True, virt_type="kvm",
        hostdevs=(
            PciHostdev("0000:3b:00.0"),  # a whole GPU
            MdevHostdev("9d0b6d4e-58c6-4a0b-8c55-3c1f1f3f6a11", "nvidia-700", "0000:3b:00.0", gpu_instance_id=2),
            PciHostdev("0000:9b:00.4", vgpu_type="NVIDIA H100XM-3-40C", is_vf=True),  # SR-IOV VF vGPU
        ),
        seed=CloudInitSeed("i-1", "gpu-vm", ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB k",)))
    base.update(kw)
    return DomainSpec(**base)


def test_gpu_domain_validates_and_round_trips(driver):
    spec = _gpu_spec()
    driver.domain_define(spec)
    root = ET.fromstring(driver.domain_xml_get(spec.uuid))
    pci = [(a.get("bus"), a.get("slot"), a.get("function"))
           for a in root.iterfind("devices/hostdev[@type='pci']/source/address")]
    assert pci == [("0x3b", "0x00", "0x0"), ("0x9b", "0x00", "0x4")]
    assert [h.get("managed") for h in root.iterfind("devices/hostdev[@type='pci']")] == ["yes", "yes"]
    mdev = root.find("devices/hostdev[@type='mdev']")
    assert (mdev.get("model"), mdev.find("source/address").get("uuid")) == (
        "vfio-pci", "9d0b6d4e-58c6-4a0b-8c55-3c1f1f3f6a11")
    assert root.find("os").get("firmware") == "efi"
    assert root.find("os/type").get("machine") == "q35"
    assert root.find("numatune/memory").attrib == {"mode": "strict", "nodeset": "1"}
    assert [(p.get("vcpu"), p.get("cpuset")) for p in root.iterfind("cputune/vcpupin")] == [
        ("0", "16"), ("1", "17"), ("2", "18"), ("3", "19")]
    assert root.find("memoryBacking/hugepages/page").attrib == {"size": "1048576", "unit": "KiB"}
    assert root.find("devices/disk[@device='cdrom']/source").get("file").endswith(f"{spec.uuid}-seed.iso")


def test_two_guest_numa_nodes_validate_and_round_trip(driver):
    """kvm (host-passthrough CPU) with two guest NUMA nodes, 1 GiB pages, vCPUs pinned per node, emulator apart."""
    spec = _gpu_spec(numa_node=0, cpuset=(), dedicated_cpus=False, vcpus=4, memory_mib=8192,
                     numa_cells=(NumaCell(0, (0, 1), (1, 2, 3), 4096), NumaCell(1, (2, 3), (5, 6, 7), 4096)),
                     emulator_cpuset=(0, 4))
    driver.domain_define(spec)
    root = ET.fromstring(driver.domain_xml_get(spec.uuid))
    assert root.find("cpu").get("mode") == "host-passthrough"
    assert [(c.get("id"), c.get("cpus"), c.get("memory")) for c in root.iterfind("cpu/numa/cell")] == [
        ("0", "0-1", "4194304"), ("1", "2-3", "4194304")]
    assert [(p.get("vcpu"), p.get("cpuset")) for p in root.iterfind("cputune/vcpupin")] == [
        ("0", "1-3"), ("1", "1-3"), ("2", "5-7"), ("3", "5-7")]
    assert root.find("cputune/emulatorpin").get("cpuset") == "0,4"
    assert [(m.get("cellid"), m.get("nodeset")) for m in root.iterfind("numatune/memnode")] == [("0", "0"), ("1", "1")]


def _guest_node_of(root: ET.Element) -> dict[str, str]:
    """{hostdev source (PCI bus or mdev UUID): the guest NUMA node of the expander bus its root port sits on}, for
    the hostdevs under an expander bus."""
    ctl = {c.get("index"): c for c in root.iterfind("devices/controller[@type='pci']")}
    out = {}
    for hd in root.iterfind("devices/hostdev"):
        src, addr = hd.find("source/address"), hd.find("address")
        port = ctl.get(str(int(addr.get("bus"), 16))) if addr is not None else None
        if port is None or port.find("address") is None:
            continue
        pxb = ctl[str(int(port.find("address").get("bus"), 16))]
        if (port.get("model"), pxb.get("model")) == ("pcie-root-port", "pcie-expander-bus"):
            out[src.get("uuid") or src.get("bus")] = pxb.findtext("target/node")
    return out


def test_devices_sit_under_their_guest_nodes_expander_bus(driver):
    """Two guest nodes: each gets a pcie-expander-bus (pxb-pcie) with its <node>, and each device a root port on
    its node's bus; libvirt's schema takes it and keeps it as written (bus ranges from the top down)."""
    mdev = "9d0b6d4e-58c6-4a0b-8c55-3c1f1f3f6a11"
    spec = _gpu_spec(numa_node=0, cpuset=(), dedicated_cpus=False, vcpus=4, memory_mib=8192,
                     numa_cells=(NumaCell(0, (0, 1), (1, 2, 3), 4096), NumaCell(1, (2, 3), (5, 6, 7), 4096)),
                     emulator_cpuset=(0, 4), hostdevs=(
                         PciHostdev("0000:18:00.0", guest_node=0), PciHostdev("0000:9a:00.0", guest_node=1),
                         PciHostdev("0000:1a:00.0", guest_node=0),  # an HCA on node 0
                         MdevHostdev(mdev, "nvidia-700", "0000:9a:00.0", guest_node=1),
                         PciHostdev("0000:5a:00.0")))  # no guest node: libvirt places it
    driver.domain_define(spec)
    root = ET.fromstring(driver.domain_xml_get(spec.uuid))
    buses = [(c.get("index"), c.find("target").get("busNr"), c.findtext("target/node"))
             for c in root.iterfind("devices/controller[@model='pcie-expander-bus']")]
    assert buses == [("1", "252", "0"), ("4", "249", "1")]
    assert _guest_node_of(root) == {"0x18": "0", "0x1a": "0", "0x9a": "1", mdev: "1"}


def test_ovs_interface_validates_and_round_trips(driver):
    """A tenant NIC: virtio on the OVS integration bridge, libvirt's openvswitch virtualport with the port's
    UUID as interfaceid (the RNG allows only a UUID there), OVN's iface-id in our metadata."""
    port_id = uuid.uuid4()
    nic = NetInterface(mac_address="0a:58:0a:0a:01:02", port_id=port_id, iface_id=f"gpc-p-{port_id.hex}")
    spec = _gpu_spec(interfaces=(nic,))
    driver.domain_define(spec)
    root = ET.fromstring(driver.domain_xml_get(spec.uuid))
    (iface,) = root.iterfind("devices/interface")
    assert iface.get("type") == "bridge"
    assert (iface.find("mac").get("address"), iface.find("source").get("bridge"),
            iface.find("model").get("type")) == ("0a:58:0a:0a:01:02", "br-int", "virtio")
    assert iface.find("virtualport").get("type") == "openvswitch"
    assert iface.find("virtualport/parameters").get("interfaceid") == str(port_id)
    ns = "{https://gpucloud.dev/xmlns/instance/1}"
    meta = root.find(f"metadata/{ns}instance/{ns}interface")
    assert meta is not None and meta.get("iface-id") == f"gpc-p-{port_id.hex}"


def test_bad_mdev_uuid_is_rejected_by_libvirt(driver):
    spec = _gpu_spec(hostdevs=(MdevHostdev("not-a-uuid", "nvidia-700", "0000:3b:00.0"),))
    with pytest.raises(DriverError) as exc:
        driver.domain_define(spec)
    assert exc.value.code == "invalid_domain_xml"
    assert "failed to validate against schema" in str(exc.value)


def test_schema_rejects_what_the_rng_forbids(driver):
    """The driver defines with VIR_DOMAIN_DEFINE_VALIDATE: an element the RNG does not allow fails."""
    spec = _gpu_spec(hostdevs=())
    xml = driver.domain_xml(spec).replace("<devices>", "<devices><gpu-not-a-device/>")
    import libvirt

    from apps.compute.drivers.libvirt.connection import get_connection

    with pytest.raises(libvirt.libvirtError) as exc:
        get_connection(driver.uri).defineXMLFlags(xml, libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
    assert exc.value.get_error_code() == libvirt.VIR_ERR_XML_INVALID_SCHEMA
    assert driver._error(exc.value, "define").code == "invalid_domain_xml"


def test_root_disk_is_an_overlay_volume_in_the_pool(tmp_path):
    from apps.compute.drivers.libvirt.connection import drop_connection

    drv = LibvirtDriver("test:///default", seed_dir=str(tmp_path), pool="default-pool")
    spec = _gpu_spec(hostdevs=(), disk=DiskSpec(40, "/images/ubuntu-24.04.qcow2"))
    try:
        drv.domain_define(spec)
        root = ET.fromstring(drv.domain_xml_get(spec.uuid))
        assert root.find("devices/disk[@device='disk']/source").get("file") == (
            f"/default-pool/{spec.uuid}-root.qcow2")
    finally:
        drv.domain_delete(spec.uuid)
        drop_connection("test:///default")
