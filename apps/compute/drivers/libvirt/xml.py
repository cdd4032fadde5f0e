"""Domain and node-device XML for libvirt, built with ElementTree from the driver's dataclasses.

Element names and attributes follow libvirt's "Domain XML format" (libvirt.org/formatdomain.html) and
"Node devices" (libvirt.org/formatnode.html); libvirt validates the result against its RNG schemas when the
driver defines with `VIR_DOMAIN_DEFINE_VALIDATE`.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from apps.core.drivers import DriverError

from ..base import DomainSpec, MdevHostdev, NetInterface, PciHostdev, VolumeDisk

METADATA_NS = "https://gpucloud.dev/xmlns/instance/1"
METADATA_PREFIX = "gpucloud"
ET.register_namespace(METADATA_PREFIX, METADATA_NS)
_PCI_RE = re.compile(r"^([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")


def pci_parts(address: str) -> dict[str, str]:
    """`DDDD:BB:SS.F` → libvirt `<address>` attributes. Raises `DriverError` (code `invalid_pci_address`)."""
    m = _PCI_RE.match(address)
    if not m:
        raise DriverError(f"invalid PCI address {address!r} (want DDDD:BB:SS.F)", code="invalid_pci_address")
    dom, bus, slot, fn = m.groups()
    return {"domain": f"0x{dom.lower()}", "bus": f"0x{bus.lower()}", "slot": f"0x{slot.lower()}",
            "function": f"0x{fn}"}


def nodedev_name(address: str) -> str:
    """libvirt's node-device name for a PCI address: ``0000:3b:00.0`` → ``pci_0000_3b_00_0``."""
    pci_parts(address)
    return "pci_" + address.lower().replace(":", "_").replace(".", "_")


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, tag, {k.rstrip("_"): v for k, v in attrs.items()})
    if text is not None:
        el.text = text
    return el


def _cpuset(cpus: tuple[int, ...]) -> str:
    return ",".join(str(c) for c in cpus)


def _ranges(ids) -> str:
    """(0, 1, 2, 5) → '0-2,5' (libvirt's cpuset syntax)."""
    out: list[str] = []
    ids = sorted(set(ids))
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(out)


def _numa_cells(root: ET.Element, spec: DomainSpec) -> None:
    """vCPU and emulator pinning, strict per-node memory binding (formatdomain "CPU Tuning", "NUMA Node Tuning")
    for `spec.numa_cells`; the guest topology itself goes into `<cpu><numa>` (`_guest_numa`)."""
    cells = spec.numa_cells
    if sum(c.memory_mib for c in cells) != spec.memory_mib or sorted(v for c in cells for v in c.vcpus) != list(
            range(spec.vcpus)):
        raise DriverError("NUMA cells do not add up to the VM's vCPUs and memory", code="invalid_numa_cells")
    if spec.hugepages and any(c.memory_mib % 1024 for c in cells):
        raise DriverError("hugepages need every NUMA cell in whole GiB", code="invalid_memory_for_hugepages")
    tune = _sub(root, "cputune")
    for c in cells:
        for v in c.vcpus:
            if c.cpuset:
                _sub(tune, "vcpupin", vcpu=str(v), cpuset=_ranges(c.cpuset))
    if spec.emulator_cpuset:
        _sub(tune, "emulatorpin", cpuset=_ranges(spec.emulator_cpuset))
    if not len(tune):
        root.remove(tune)
    nt = _sub(root, "numatune")
    _sub(nt, "memory", mode="strict", nodeset=_ranges(c.host_node for c in cells))
    for i, c in enumerate(cells):
        _sub(nt, "memnode", cellid=str(i), mode="strict", nodeset=str(c.host_node))


def _guest_numa(root: ET.Element, spec: DomainSpec) -> None:
    if not spec.numa_cells:
        return
    cpu = root.find("cpu")
    if cpu is None:
        cpu = _sub(root, "cpu")
    numa = _sub(cpu, "numa")
    for i, c in enumerate(spec.numa_cells):
        _sub(numa, "cell", id=str(i), cpus=_ranges(c.vcpus), memory=str(c.memory_mib), unit="MiB")


def _metadata(root: ET.Element, spec: DomainSpec) -> None:
    md = _sub(root, "metadata")
    inst = ET.SubElement(md, f"{{{METADATA_NS}}}instance")
    _sub(inst, f"{{{METADATA_NS}}}project", spec.project_id)
    for key, value in spec.labels:
        _sub(inst, f"{{{METADATA_NS}}}label", value, key=key)
    for nic in spec.interfaces:
        _sub(inst, f"{{{METADATA_NS}}}interface", mac=nic.mac_address, **{"iface-id": nic.iface_id})


def _cpu_and_memory(root: ET.Element, spec: DomainSpec) -> None:
    _sub(root, "memory", str(spec.memory_mib), unit="MiB")
    if spec.hugepages:
        if spec.memory_mib % 1024:
            raise DriverError("hugepages need memory_mib in whole GiB", code="invalid_memory_for_hugepages")
        mb = _sub(root, "memoryBacking")
        _sub(_sub(mb, "hugepages"), "page", size="1", unit="G")
    vcpu = _sub(root, "vcpu", str(spec.vcpus), placement="static")
    if spec.numa_cells:
        if any(c.cpuset for c in spec.numa_cells):
            vcpu.set("cpuset", _ranges(x for c in spec.numa_cells for x in c.cpuset))
        _numa_cells(root, spec)
        return
    if spec.cpuset:
        vcpu.set("cpuset", _cpuset(spec.cpuset))
    if spec.cpuset and spec.dedicated_cpus:
        if len(spec.cpuset) < spec.vcpus:
            raise DriverError("cpuset has fewer host CPUs than vcpus", code="invalid_cpuset")
        tune = _sub(root, "cputune")
        for i in range(spec.vcpus):
            _sub(tune, "vcpupin", vcpu=str(i), cpuset=str(spec.cpuset[i]))
    if spec.numa_node is not None:
        _sub(_sub(root, "numatune"), "memory", mode="strict", nodeset=str(spec.numa_node))


def _os_and_features(root: ET.Element, spec: DomainSpec) -> None:
    os_el = _sub(root, "os")
    if spec.secure_boot and not spec.uefi:
        raise DriverError("Secure Boot needs UEFI firmware", code="secure_boot_needs_uefi")
    _sub(os_el, "type", "hvm", arch=spec.arch, machine=spec.machine)
    if spec.uefi:
        # Firmware autoselection (libvirt formatdomain "BIOS bootloader", >= 7.2 for <firmware><feature>): libvirt
        # picks the OVMF build whose descriptor (/usr/share/qemu/firmware/*.json) matches the features. Secure Boot
        # off by default: the NVIDIA driver's DKMS-built modules are unsigned and a Secure Boot kernel refuses them.
        # With Secure Boot the build with Microsoft's keys enrolled is chosen; it needs SMM (below).
        os_el.set("firmware", "efi")
        fw = _sub(os_el, "firmware")
        state = "yes" if spec.secure_boot else "no"
        _sub(fw, "feature", enabled=state, name="enrolled-keys")
        _sub(fw, "feature", enabled=state, name="secure-boot")
        if spec.secure_boot:
            _sub(os_el, "loader", secure="yes")
    if not any(v.boot for v in spec.volumes):
        # a boot volume carries its own <boot order>; libvirt refuses both kinds in one domain (formatdomain,
        # "BIOS bootloader": the per-device boot elements cannot be used together with os/boot)
        _sub(os_el, "boot", dev="hd")
    feats = _sub(root, "features")
    _sub(feats, "acpi")
    _sub(feats, "apic")
    if spec.secure_boot:
        _sub(feats, "smm", state="on")
    if spec.virt_type == "kvm":
        # NVIDIA's consumer drivers refuse to load when they see a hypervisor; data-centre GPUs do not care,
        # but hiding KVM is harmless (libvirt formatdomain "Hypervisor features": kvm/hidden).
        _sub(_sub(feats, "kvm"), "hidden", state="on")
        _sub(root, "cpu", mode="host-passthrough", check="none", migratable="off")
    _sub(root, "on_poweroff", "destroy")
    _sub(root, "on_reboot", "restart")
    _sub(root, "on_crash", "destroy")


#: the highest bus number an expander bus range may use (libvirt takes busNr 1..254); ranges go from the top down (the root complex's own
#: buses, numbered from 0 by the firmware, stay below them)
_LAST_BUS = 0xFE


def _expander_buses(devices: ET.Element, spec: DomainSpec) -> dict[int, int]:
    """One PCIe expander bus (QEMU's ``pxb-pcie``, libvirt ``pcie-expander-bus``) per guest NUMA node, with
    ``<target busNr><node>`` set to the node, and one ``pcie-root-port`` on it per host device of that node
    (`guest_node`), so the guest's kernel sees each GPU (and HCA) on its NUMA node (formatdomain "Controllers":
    pcie-expander-bus, pcie-root-port; QEMU docs/pci_expander_bridge). Returns {index in `spec.hostdevs`: the
    controller index of its root port} for the device's ``<address bus>``. Controller indexes start at 1 (0 is
    pcie-root); libvirt numbers the root ports it adds for other devices after them. Each bus takes the bus
    numbers ``busNr`` .. ``busNr + its root ports``, from the top down."""
    if not spec.numa_cells:
        return {}
    cells = len(spec.numa_cells)
    by_cell: dict[int, list[int]] = {i: [] for i in range(cells)}
    for k, dev in enumerate(spec.hostdevs):
        if dev.guest_node is not None:
            if not 0 <= dev.guest_node < cells:
                raise DriverError(f"host device on guest NUMA node {dev.guest_node}; the guest has {cells}",
                                  code="invalid_numa_cells")
            by_cell[dev.guest_node].append(k)
    out: dict[int, int] = {}
    index, top = 1, _LAST_BUS + 1
    for cell, devs in by_cell.items():
        top -= len(devs) + 1
        pxb, index = index, index + 1
        ctl = _sub(devices, "controller", type="pci", index=str(pxb), model="pcie-expander-bus")
        _sub(_sub(ctl, "target", busNr=str(top)), "node", str(cell))
        for slot, k in enumerate(devs):
            port = _sub(devices, "controller", type="pci", index=str(index), model="pcie-root-port")
            _sub(port, "address", type="pci", domain="0x0000", bus=f"0x{pxb:02x}", slot=f"0x{slot:02x}",
                 function="0x0")
            out[k], index = index, index + 1
    return out


def _hostdev(devices: ET.Element, dev: PciHostdev | MdevHostdev, bus: int | None = None) -> None:
    """`bus`: the controller index of the root port the device sits in (`_expander_buses`); None: libvirt
    chooses."""
    if isinstance(dev, PciHostdev):
        hd = _sub(devices, "hostdev", mode="subsystem", type="pci", managed="yes")
        _sub(_sub(hd, "source"), "address", **pci_parts(dev.address))
    elif isinstance(dev, MdevHostdev):
        # display='off': compute vGPUs have no display; ramfb only applies to display-capable types.
        hd = _sub(devices, "hostdev", mode="subsystem", type="mdev", model="vfio-pci", display="off")
        _sub(_sub(hd, "source"), "address", uuid=dev.uuid)
    else:  # pragma: no cover - the dataclass union is closed
        raise DriverError(f"unknown host device {dev!r}", code="invalid_hostdev")
    if bus is not None:
        _sub(hd, "address", type="pci", domain="0x0000", bus=f"0x{bus:02x}", slot="0x00", function="0x0")


def _interface(devices: ET.Element, nic: NetInterface) -> None:
    """`<interface type='bridge'>` on the OVS bridge with OVN's iface-id (libvirt formatdomain, "Bridge to LAN"
    with `<virtualport type='openvswitch'>`)."""
    iface = _sub(devices, "interface", type="bridge")
    _sub(iface, "mac", address=nic.mac_address)
    _sub(iface, "source", bridge=nic.bridge)
    _sub(_sub(iface, "virtualport", type="openvswitch"), "parameters", interfaceid=str(nic.port_id))
    _sub(iface, "model", type="virtio")


def _volume_disk(devices: ET.Element, vol: VolumeDisk) -> None:
    """The same `<disk>` storage's driver hot-plugs (`apps.storage.drivers.libvirt.xml.disk_xml`)."""
    if vol.source_type not in ("file", "block") or not vol.path.startswith("/"):
        raise DriverError(f"volume disk {vol.target_dev}: source {vol.source_type} {vol.path!r}",
                          code="invalid_disk_attachment")
    d = _sub(devices, "disk", type=vol.source_type, device="disk")
    driver = {"name": "qemu", "type": vol.format, "cache": vol.cache, "discard": "unmap"}
    if vol.cache in ("none", "directsync"):
        driver["io"] = "native"  # QEMU's native AIO needs O_DIRECT
    _sub(d, "driver", **driver)
    _sub(d, "source", **{"file" if vol.source_type == "file" else "dev": vol.path})
    _sub(d, "target", dev=vol.target_dev, bus=vol.bus)
    if vol.serial:
        _sub(d, "serial", vol.serial)
    if vol.boot:
        _sub(d, "boot", order="1")
    if vol.read_only:
        _sub(d, "readonly")


def _disks(devices: ET.Element, spec: DomainSpec, disk_path: str, seed_path: str) -> None:
    if spec.disk is not None and disk_path:
        d = _sub(devices, "disk", type="file", device="disk")
        _sub(d, "driver", name="qemu", type=spec.disk.format, discard="unmap")
        _sub(d, "source", file=disk_path)
        _sub(d, "target", dev="vda", bus="virtio")
    for vol in spec.volumes:
        _volume_disk(devices, vol)
    if seed_path:
        c = _sub(devices, "disk", type="file", device="cdrom")
        _sub(c, "driver", name="qemu", type="raw")
        _sub(c, "source", file=seed_path)
        _sub(c, "target", dev="sda", bus="sata")
        _sub(c, "readonly")


def domain_xml(spec: DomainSpec, *, disk_path: str = "", seed_path: str = "", serial_log_path: str = "",
               extra_root_attrs: dict[str, str] | None = None) -> str:
    """The `<domain>` document for `spec`. Raises `DriverError` for an invalid PCI address, cpuset or memory.

    Shape: q35 (or `spec.machine`), UEFI when `spec.uefi` (Secure Boot off unless `spec.secure_boot`), vCPUs pinned 1:1 to `spec.cpuset`, memory bound to
    the GPUs' NUMA node (or, with `spec.numa_cells`, one guest NUMA node per cell with its vCPUs pinned to the cell's
    host CPUs, its memory bound to the cell's host node and the emulator threads pinned apart, and a PCIe expander bus
    on the node with a root port for each of the node's host devices), optional 1 GiB hugepages, one OVS `<interface>` per tenant port, one `<hostdev>` per GPU/VF/mdev, a NoCloud seed CD-ROM, and
    a serial console whose output is also logged to `serial_log_path`.
    """
    root = ET.Element("domain", {"type": spec.virt_type, **(extra_root_attrs or {})})
    _sub(root, "name", spec.name)
    _sub(root, "uuid", str(spec.uuid))
    _metadata(root, spec)
    _cpu_and_memory(root, spec)
    _os_and_features(root, spec)
    _guest_numa(root, spec)
    devices = _sub(root, "devices")
    if spec.emulator:
        _sub(devices, "emulator", spec.emulator)
    _disks(devices, spec, disk_path, seed_path)
    for nic in spec.interfaces:
        _interface(devices, nic)
    ports = _expander_buses(devices, spec)
    for k, dev in enumerate(spec.hostdevs):
        _hostdev(devices, dev, ports.get(k))
    serial = _sub(devices, "serial", type="pty")
    if serial_log_path:
        _sub(serial, "log", file=serial_log_path, append="on")
    _sub(serial, "target", port="0")
    _sub(_sub(devices, "console", type="pty"), "target", type="serial", port="0")
    return ET.tostring(root, encoding="unicode")


def mdev_xml(dev: MdevHostdev) -> str:
    """Node-device XML that creates the mediated device `dev` under its parent (libvirt formatnode.html, mdev
    capability with `<uuid>`, libvirt >= 7.3)."""
    root = ET.Element("device")
    _sub(root, "parent", nodedev_name(dev.parent))
    cap = _sub(root, "capability", type="mdev")
    _sub(cap, "type", id=dev.mdev_type)
    _sub(cap, "uuid", dev.uuid)
    return ET.tostring(root, encoding="unicode")


def parse_metadata(xml: str) -> tuple[bool, str]:
    """From a domain's XMLDesc: (has our metadata element, project id)."""
    root = ET.fromstring(xml)
    inst = root.find(f"metadata/{{{METADATA_NS}}}instance")
    if inst is None:
        return False, ""
    return True, (inst.findtext(f"{{{METADATA_NS}}}project") or "")


def serial_log_file(xml: str) -> str:
    """The serial console log path recorded in a domain's XML ('' when none)."""
    root = ET.fromstring(xml)
    log = root.find("devices/serial/log")
    return log.get("file", "") if log is not None else ""


def parse_mdev_types(nodedev_xml: str) -> list[tuple[str, str, int]]:
    """(type id, name, availableInstances) for each `mdev_types` entry of a PCI node device's XML."""
    root = ET.fromstring(nodedev_xml)
    out = []
    for t in root.iterfind("capability/capability[@type='mdev_types']/type"):
        out.append((t.get("id", ""), t.findtext("name") or "", int(t.findtext("availableInstances") or 0)))
    return out


def parse_mdev_uuid(nodedev_xml: str) -> str:
    """The UUID of an mdev node device (libvirt >= 7.3 reports `<uuid>` in the mdev capability)."""
    root = ET.fromstring(nodedev_xml)
    return (root.findtext("capability[@type='mdev']/uuid") or "").lower()
