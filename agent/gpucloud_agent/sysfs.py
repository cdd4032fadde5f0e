"""Host facts and InfiniBand HCA ports from sysfs/procfs (Linux kernel ABI: Documentation/ABI/stable/sysfs-class-infiniband).

`/sys/class/infiniband/<dev>/ports/<n>/`: `gids/0` is the port GID 0 (subnet prefix + port GUID), `lid` (hex),
`rate` ("400 Gb/sec (4X NDR)"), `state` ("4: ACTIVE"), `phys_state` ("5: LinkUp"), `link_layer` ("InfiniBand" |
"Ethernet"), `counters/<name>` (error counters, decimal).
Roots are parameters so tests can point them at a fake tree.
"""
from __future__ import annotations

import os
import re
from pathlib import Path


def _read(path: Path, default: str = "") -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return default


def _ib_ports(sysfs_root: Path | str):
    """The `ports/<n>` directories of every HCA whose link layer is InfiniBand, by device then port number."""
    base = Path(sysfs_root) / "class" / "infiniband"
    for dev in sorted(base.glob("*")) if base.exists() else []:
        for port in sorted((dev / "ports").glob("*"), key=lambda p: int(p.name) if p.name.isdigit() else 0):
            if port.name.isdigit() and _read(port / "link_layer", "InfiniBand") == "InfiniBand":
                yield dev.name, port


def _port_state(port: Path, name: str) -> str:
    """`state` ("4: ACTIVE") / `phys_state` ("5: LinkUp") -> the name after the number."""
    value = _read(port / name)
    return value.split(":", 1)[-1].strip() if value else ""


def _rate_gbps(port: Path) -> int:
    rate = re.match(r"(\d+)", _read(port / "rate"))
    return int(rate.group(1)) if rate else 0


def hca_ports(sysfs_root: Path | str = "/sys") -> list[dict]:
    """InfiniBand ports (link layer InfiniBand only): device, port number, port GUID, LID, rate, state, and the
    device's PCI function (`pci_address`, from the `device` link) with its SR-IOV VFs (`vfs`: [{"index",
    "pci_address"}] as `pci_virtual_functions` reads them; empty without SR-IOV). A VF's own RDMA device (its
    `device/physfn` link exists) is not a port of the host: it is left out."""
    out = []
    functions: dict[str, tuple[str, list[dict]]] = {}
    for dev, port in _ib_ports(sysfs_root):
        link = Path(sysfs_root) / "class" / "infiniband" / dev / "device"
        if (link / "physfn").exists():
            continue
        if dev not in functions:
            pci = Path(os.path.realpath(link)).name if link.exists() else ""
            functions[dev] = (pci, pci_virtual_functions(sysfs_root, pci) if pci else [])
        gid = _read(port / "gids" / "0")
        guid = "0x" + gid.replace(":", "")[-16:] if gid else ""
        out.append({"device": dev, "port_number": int(port.name), "port_guid": guid,
                    "lid": int(_read(port / "lid", "0x0"), 16), "rate_gbps": _rate_gbps(port),
                    "state": _port_state(port, "state"), "pci_address": functions[dev][0],
                    "vfs": functions[dev][1]})
    return out


#: InfiniBand port error counters read for health (`ports/<n>/counters/`, the PortCounters attribute of the IBTA
#: specification as the kernel exposes it). `link_downed` (the link went down and retraining failed or a flap) is
#: read too, but reported as link flaps, not errors.
IB_ERROR_COUNTERS = ("symbol_error", "link_error_recovery", "port_rcv_errors", "port_rcv_remote_physical_errors",
                     "port_rcv_switch_relay_errors", "port_xmit_discards", "port_xmit_constraint_errors",
                     "port_rcv_constraint_errors", "local_link_integrity_errors", "excessive_buffer_overrun_errors",
                     "VL15_dropped")


def ib_port_health(sysfs_root: Path | str = "/sys") -> list[dict]:
    """Every InfiniBand port's link and error counters now: [{"device", "port_number", "state" ("ACTIVE", "DOWN",
    "INIT", ...), "phys_state" ("LinkUp", "Polling", "Disabled", ...), "rate_gbps", "link_downed" (int or None),
    "counters": {name: int}}]; a counter the kernel does not expose (or that does not read as a number) is left
    out. Counters are cumulative since the driver loaded (or the last reset) and saturate at their width."""
    out = []
    for dev, port in _ib_ports(sysfs_root):
        counters = {}
        for name in (*IB_ERROR_COUNTERS, "link_downed"):
            value = _read(port / "counters" / name)
            if value.isdigit():
                counters[name] = int(value)
        out.append({"device": dev, "port_number": int(port.name), "state": _port_state(port, "state"),
                    "phys_state": _port_state(port, "phys_state"), "rate_gbps": _rate_gbps(port),
                    "link_downed": counters.pop("link_downed", None), "counters": counters})
    return out


def _colon_guid(guid: str) -> str:
    """0x-prefixed GUID -> the text the mlx5 SR-IOV sysfs files take and show (8 colon-separated bytes)."""
    value = int(guid, 16) if guid else 0
    return ":".join(f"{b:02x}" for b in value.to_bytes(8, "big"))


def hca_vf_set_guid(sysfs_root: Path | str, device: str, vf_index: int, guid: str) -> None:
    """Give SR-IOV VF `vf_index` of HCA `device` (an mlx5 physical function) its node and port GUID `guid`
    (0x-prefixed) and let its port follow the physical port's state, through the driver's per-VF files
    `/sys/class/infiniband/<device>/device/sriov/<n>/{node,port,policy}` (mlx5_ib; ADR 0508), then read them back.
    Written before the VF is given to a VM (the VF's driver reads them when it loads). An all-zero `guid` with
    policy `Down` clears the VF (the scrub). Raises OSError (no such VF or the driver refuses) and ValueError
    (the read-back differs)."""
    vf = Path(sysfs_root) / "class" / "infiniband" / device / "device" / "sriov" / str(vf_index)
    if not vf.exists():
        raise FileNotFoundError(f"{device} has no SR-IOV VF {vf_index} (sriov/{vf_index})")
    text = _colon_guid(guid)
    policy = "Follow" if int(guid or "0", 16) else "Down"
    for name, value in (("node", text), ("port", text), ("policy", policy)):
        (vf / name).write_text(value)
    got = (_read(vf / "node").lower(), _read(vf / "port").lower(), _read(vf / "policy"))
    if got != (text, text, policy):
        raise ValueError(f"{device} VF {vf_index} reads back node/port/policy {got}, not {(text, text, policy)}")


def pci_numa_node(sysfs_root: Path | str, pci_address: str) -> int:
    value = _read(Path(sysfs_root) / "bus" / "pci" / "devices" / pci_address / "numa_node", "0")
    return max(0, int(value)) if value.lstrip("-").isdigit() else 0


def pci_virtual_functions(sysfs_root: Path | str, pci_address: str) -> list[dict]:
    """SR-IOV VFs of a PCI device: its `virtfnN` links (kernel PCI sysfs ABI), as [{"index", "pci_address"}].

    The VF count is what the kernel created, not what the vendor tool claimed (RW-017: `sriov-manage` may exit 0
    and create nothing), so the control plane sees 0 VFs when enabling failed.
    """
    dev = Path(sysfs_root) / "bus" / "pci" / "devices" / pci_address
    out = []
    for link in dev.glob("virtfn*"):
        suffix = link.name.removeprefix("virtfn")
        if suffix.isdigit():
            out.append({"index": int(suffix), "pci_address": Path(os.readlink(link)).name})
    return sorted(out, key=lambda v: v["index"])


def pci_vf_reset(sysfs_root: Path | str, pci_address: str) -> None:
    """Scrub an SR-IOV VF a vGPU used: clear its vGPU type (`nvidia/current_vgpu_type` := 0, NVIDIA's vendor VFIO
    sysfs interface, where present) and reset the function (`reset` := 1, kernel PCI sysfs ABI: a function-level
    reset). Raises OSError when the VF is absent or the kernel refuses (e.g. the VF is still in use by a VM)."""
    dev = Path(sysfs_root) / "bus" / "pci" / "devices" / pci_address
    if not dev.exists():
        raise FileNotFoundError(f"no PCI device {pci_address}")
    vgpu_type = dev / "nvidia" / "current_vgpu_type"
    if vgpu_type.exists() and _read(vgpu_type, "0") != "0":
        vgpu_type.write_text("0")
    (dev / "reset").write_text("1")


def pci_sriov_enable(sysfs_root: Path | str, pci_address: str, num_vfs: int) -> int:
    """Enable `num_vfs` SR-IOV VFs on a physical function (`sriov_numvfs`, kernel PCI sysfs ABI; the kernel forgets
    them at every boot). A function that has that many already is left as it is; one with another non-zero count
    is set to 0 first (the kernel refuses a change between two non-zero counts). The count is read back from the
    `virtfnN` links the kernel made (a vendor tool may claim VFs it did not create). Returns the count. Raises
    OSError (the device is absent, e.g. it did not come back after a reboot, or the kernel refused) and ValueError
    (fewer VFs than asked read back)."""
    dev = Path(sysfs_root) / "bus" / "pci" / "devices" / pci_address
    if not dev.exists():
        raise FileNotFoundError(f"no PCI device {pci_address}")
    numvfs = dev / "sriov_numvfs"
    if _read(numvfs, "0") != str(num_vfs):
        if _read(numvfs, "0") != "0":
            numvfs.write_text("0")
        numvfs.write_text(str(num_vfs))
    got = len(pci_virtual_functions(sysfs_root, pci_address))
    if got < num_vfs:
        raise ValueError(f"{pci_address} has {got} VFs after enabling {num_vfs}")
    return got


def pci_bind_vfio(sysfs_root: Path | str, pci_address: str) -> None:
    """Bind a PCI function to `vfio-pci` for passthrough (kernel PCI sysfs ABI: `driver_override` := vfio-pci,
    unbind from its current driver, `drivers_probe`), read back through its `driver` link. A function already on
    vfio-pci is left as it is. Raises OSError (the device is absent or the kernel refused) and ValueError (another
    driver holds it after the probe)."""
    dev = Path(sysfs_root) / "bus" / "pci" / "devices" / pci_address
    if not dev.exists():
        raise FileNotFoundError(f"no PCI device {pci_address}")
    driver = dev / "driver"
    if driver.exists() and Path(os.readlink(driver)).name == "vfio-pci":
        return
    (dev / "driver_override").write_text("vfio-pci")
    if driver.exists():
        (driver / "unbind").write_text(pci_address)
    (Path(sysfs_root) / "bus" / "pci" / "drivers_probe").write_text(pci_address)
    bound = Path(os.readlink(driver)).name if driver.exists() else ""
    if bound != "vfio-pci":
        raise ValueError(f"{pci_address} is bound to {bound or 'no driver'}, not vfio-pci, after the probe")


def _vgpu_type_ids(text: str) -> dict[str, str]:
    """`nvidia/creatable_vgpu_types` of a VF (NVIDIA vGPU user guide, "Creating an NVIDIA vGPU on a Linux with
    KVM Hypervisor", vendor-specific VFIO): a header, then `<id> : <name>` lines, the name as `NVIDIA L40S-4Q`.
    -> {type name without the vendor prefix: id}."""
    out = {}
    for line in text.splitlines():
        head, sep, name = line.partition(":")
        if sep and head.strip().isdigit():
            out[name.strip().removeprefix("NVIDIA ").strip()] = head.strip()
    return out


def pci_vf_set_vgpu_type(sysfs_root: Path | str, pci_address: str, vgpu_type: str) -> str:
    """Give an SR-IOV VF the vGPU type `vgpu_type` (a catalog name, e.g. `L40S-4Q`) before its VM starts: the id
    from the VF's `nvidia/creatable_vgpu_types` is written to `nvidia/current_vgpu_type` and read back. A VF that
    already has the type is left as it is. Returns the id. Raises OSError (the VF or the vendor VFIO interface is
    absent), LookupError (the VF cannot create that type now), ValueError (the VF has another type: it must be
    reset first, or the read-back differs)."""
    dev = Path(sysfs_root) / "bus" / "pci" / "devices" / pci_address
    if not dev.exists():
        raise FileNotFoundError(f"no PCI device {pci_address}")
    current = dev / "nvidia" / "current_vgpu_type"
    if not current.exists():
        raise FileNotFoundError(f"{pci_address} has no nvidia/current_vgpu_type (vendor VFIO vGPU manager absent)")
    ids = _vgpu_type_ids(_read(dev / "nvidia" / "creatable_vgpu_types"))
    have = _read(current, "0")
    if have != "0":  # a VF in use lists nothing creatable: its supported types name the id it has
        known = {**_vgpu_type_ids(_read(dev / "nvidia" / "supported_vgpu_types")), **ids}
        if known.get(vgpu_type) == have:
            return have
        raise ValueError(f"{pci_address} has vGPU type {have}; reset the VF before giving it {vgpu_type}")
    if vgpu_type not in ids:
        raise LookupError(f"{pci_address} cannot create vGPU type {vgpu_type} now (creatable: {sorted(ids)})")
    current.write_text(ids[vgpu_type])
    if _read(current, "0") != ids[vgpu_type]:
        raise ValueError(f"{pci_address} reads back vGPU type {_read(current, '0')}, not {ids[vgpu_type]}")
    return ids[vgpu_type]


def _cpulist(text: str) -> list[int]:
    """Linux cpulist syntax ('0-3,8,10-11') -> sorted CPU ids."""
    out: set[int] = set()
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-", 1)
            out.update(range(int(a), int(b) + 1))
        elif part:
            out.add(int(part))
    return sorted(out)


def _numa(sysfs_root: Path, core_of: dict[int, tuple[str, str]]) -> list[dict] | None:
    """Per NUMA node: its CPUs (node*/cpulist), those CPUs grouped by physical core, its memory (node*/meminfo
    `Node N MemTotal`, MiB). None when a node has no cpulist (old kernels, test trees)."""
    out = []
    for node in sorted((sysfs_root / "devices" / "system" / "node").glob("node[0-9]*"),
                       key=lambda p: int(p.name[4:])):
        if not (node / "cpulist").exists():
            return None
        cpus = _cpulist(_read(node / "cpulist"))
        cores: dict[tuple[str, str], list[int]] = {}
        for c in cpus:
            cores.setdefault(core_of.get(c, ("", str(c))), []).append(c)
        mem = re.search(r"MemTotal:\s+(\d+) kB", _read(node / "meminfo"))
        out.append({"node": int(node.name[4:]), "cpus": cpus, "cores": sorted(cores.values()),
                    "memory_mib": int(mem.group(1)) // 1024 if mem else 0})
    return out or None


def host_facts(sysfs_root: Path | str = "/sys", proc_root: Path | str = "/proc") -> dict:
    """CPU sockets/cores/threads (topology), memory (MemTotal), NUMA node count and, where the kernel lists them,
    each node's CPUs, cores and memory (`numa`: [{node, cpus, cores, memory_mib}]; the control plane pins guest
    vCPUs by it)."""
    cpus = Path(sysfs_root) / "devices" / "system" / "cpu"
    packages, cores, threads = set(), set(), 0
    core_of: dict[int, tuple[str, str]] = {}
    for cpu in cpus.glob("cpu[0-9]*"):
        pkg = _read(cpu / "topology" / "physical_package_id")
        if not pkg:
            continue
        threads += 1
        packages.add(pkg)
        core_of[int(cpu.name[3:])] = (pkg, _read(cpu / "topology" / "core_id"))
        cores.add(core_of[int(cpu.name[3:])])
    mem = re.search(r"MemTotal:\s+(\d+) kB", _read(Path(proc_root) / "meminfo"))
    nodes = len(list((Path(sysfs_root) / "devices" / "system" / "node").glob("node[0-9]*")))
    facts = {"cpu_sockets": len(packages) or 1, "cpu_cores": len(cores) or threads or 1, "cpu_threads": threads or 1,
             "memory_mib": int(mem.group(1)) // 1024 if mem else 0, "numa_nodes": nodes or 1}
    numa = _numa(Path(sysfs_root), core_of)
    if numa:
        facts["numa"] = numa
    return facts
