"""A fake NVML + Fabric Manager + sysfs backend serving an 8-GPU HGX H100 or HGX H200 host, for CI.

Values are NVIDIA's documented ones:
- DGX H100 / DGX H200 User Guide, "Hardware Overview": 2x Intel Xeon Platinum 8480C (56 cores each, 2 threads per
  core), 2 TB system memory, 8 GPUs on 4 NVSwitch chips, 8 single-port ConnectX-7 400 Gb/s NDR compute ports.
- H100 / H200 datasheets: 80 GB HBM3 / 141 GB HBM3e, PCIe Gen5 x16, 18 NVLink 4 links (900 GB/s), ECC on.
- Framebuffer totals as the driver reports them (nvidia-smi: 81559 MiB for H100 80GB HBM3, 143771 MiB for H200).
- MIG GPU instance profiles and placements of GH100 (MIG User Guide, "Supported MIG Profiles" and the
  `nvidia-smi mig -lgipp` placement lists): the driver here refuses exactly what the real one refuses.
- Fabric Manager shared NVSwitch partitions of an 8-GPU HGX H100 baseboard (Fabric Manager User Guide): 1x8, 2x4,
  4x2, 8x1 groups of GPU physical ids 1..8.
Identifiers (UUIDs, serials, GUIDs) are synthetic and derived from the fake host's identity `host_id` (a number,
or any string: the CLI uses an id kept in the agent's state directory), so two fake hosts never collide. HCA port
GUIDs are locally administered EUI-64s (`0xfa4e...`, no vendor OUI), so they never equal a fleet file's
vendor-assigned GUIDs either (a clash there is the control plane's 409 `hca_port_guid_conflict`).
With `state_path` the fake persists its MIG/partition state as JSON (so separate CLI runs see the same "driver").
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

from .base import BackendError, GpuInfo, GpuInstanceInfo

# GH100 GPU instance profiles: id -> (memory slices, compute slices, allowed starts, max per GPU)
GH100_PROFILES = {19: (1, 1, range(7), 7), 20: (1, 1, range(7), 1), 15: (2, 1, (0, 2, 4, 6), 4),
                  14: (2, 2, (0, 2, 4), 3), 9: (4, 3, (0, 4), 2), 5: (4, 4, (0,), 1), 0: (8, 7, (0,), 1)}
HGX_PARTITIONS = [{"id": 0, "gpus": list(range(1, 9))}, {"id": 1, "gpus": [1, 2, 3, 4]},
                  {"id": 2, "gpus": [5, 6, 7, 8]}, {"id": 3, "gpus": [1, 2]}, {"id": 4, "gpus": [3, 4]},
                  {"id": 5, "gpus": [5, 6]}, {"id": 6, "gpus": [7, 8]},
                  *({"id": 6 + g, "gpus": [g]} for g in range(1, 9))]
# DGX H100 GPU PCI bus ids and compute HCA device names (DGX H100 User Guide)
PCI_BUSES = ["1b", "43", "52", "61", "9d", "c3", "d1", "df"]
HCA_DEVICES = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
# PCI addresses of the baseboard's 4 NVSwitch chips (synthetic; the kernel names them nvidia-nvswitch0..3)
NVSWITCHES = ["0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"]
HCA_BUSES = ["1a", "40", "53", "64", "9c", "c0", "d2", "e4"]  # synthetic PCI buses next to their GPUs

HOSTS = {
    "hgx-h100": {"gpu_name": "NVIDIA H100 80GB HBM3", "model": "H100-SXM5-80GB", "memory_mib": 81559,
                 "serial_prefix": "1652"},
    "hgx-h200": {"gpu_name": "NVIDIA H200", "model": "H200-SXM-141GB", "memory_mib": 143771,
                 "serial_prefix": "1653"},
}
DRIVER_VERSION = "550.90.07"
# First two bytes of every fake HCA port GUID: 0xfa has the EUI-64 "locally administered" bit (0x02) set and the
# group bit (0x01) clear, so no NIC vendor's GUID (Mellanox/NVIDIA: OUI 00:02:c9, 94:6d:ae, b8:3f:d2...) is one.
FAKE_GUID_PREFIX = "fa4e"


def host_number(host_id: int | str) -> int:
    """The fake host's number (0 .. 2**28-1) used in its UUIDs, serials and GUIDs: `host_id` itself when it is an
    int in that range, else the first 28 bits of the SHA-256 of its text."""
    if isinstance(host_id, int) and 0 <= host_id < 1 << 28:
        return host_id
    return int(hashlib.sha256(str(host_id).encode()).hexdigest()[:7], 16)


class FakeBackend:
    name = "fake"

    def __init__(self, host: str = "hgx-h100", host_id: int | str = 1, state_path: str | None = None,
                 vfs_per_gpu: int = 0, vfs_per_hca: int = 0):
        if host not in HOSTS:
            raise ValueError(f"fake host must be one of {sorted(HOSTS)}")
        self.kind, self.host_id, self.spec = host, host_number(host_id), HOSTS[host]
        self.state_path = Path(state_path) if state_path else None
        self.vfs_per_gpu = vfs_per_gpu  # SR-IOV VFs enabled per GPU (0: SR-IOV off; H100/H200 expose up to 32)
        self.vfs_per_hca = vfs_per_hca  # SR-IOV VFs per HCA port (ConnectX-7: up to 127 per port with SRIOV_EN)
        self.state = {"mig": {str(i): False for i in range(8)}, "gis": {str(i): [] for i in range(8)},
                      "active_partitions": [], "resets": {str(i): 0 for i in range(8)}, "next_gi": 1}
        if self.state_path and self.state_path.exists():
            self.state = json.loads(self.state_path.read_text())
        self.state.setdefault("health", {"pending": [], "seq": 0})

    def _save(self) -> None:
        if self.state_path:
            self.state_path.parent.mkdir(parents=True, exist_ok=True)
            self.state_path.write_text(json.dumps(self.state))

    # --- discovery -------------------------------------------------------------------------------------------
    def host_facts(self) -> dict:
        return {"cpu_sockets": 2, "cpu_cores": 112, "cpu_threads": 224, "memory_mib": 2 * 1024 * 1024,
                "numa_nodes": 2, "driver_version": DRIVER_VERSION}

    def gpus(self) -> list[GpuInfo]:
        out = []
        for i in range(8):
            out.append(GpuInfo(
                index=i, uuid=f"GPU-{self.host_id:08x}-{i:04x}-4fa0-8000-{self.kind.encode().hex()[:12]}",
                serial=f"{self.spec['serial_prefix']}{self.host_id:09d}{i:02d}", name=self.spec["gpu_name"],
                model=self.spec["model"], pci_address=f"0000:{PCI_BUSES[i]}:00.0", numa_node=0 if i < 4 else 1,
                memory_mib=self.spec["memory_mib"], module_id=i + 1,
                pcie={"generation": 5, "width": 16, "max_generation": 5, "max_width": 16},
                ecc={"enabled": True, "pending": True}, nvlink={"links": 18, "active": 18},
                mig={"enabled": self.state["mig"][str(i)],
                     "layout": [vars(g) for g in self.gpu_instances(i)]},
                vfs=[{"index": v, "pci_address": f"0000:{PCI_BUSES[i]}:{(v + 4) // 8:02x}.{(v + 4) % 8}"}
                     for v in range(self.state.get("sriov", {}).get(f"0000:{PCI_BUSES[i]}:00.0",
                                                                     self.vfs_per_gpu))]))
        return out

    def hca_ports(self) -> list[dict]:
        """One ConnectX-7 port per rail; HCA *i* at PCI bus `HCA_BUSES[i]`, its VFs at functions 1.. of it."""
        return [{"device": dev, "port_number": 1, "port_guid": f"0x{FAKE_GUID_PREFIX}{self.host_id:08x}{i:04x}",
                 "lid": 1 + (100 * self.host_id + i) % 0xbfff, "rate_gbps": 400, "state": "ACTIVE",
                 "pci_address": f"0000:{HCA_BUSES[i]}:00.0",
                 "vfs": [{"index": v, "pci_address": f"0000:{HCA_BUSES[i]}:{(v + 1) // 8:02x}.{(v + 1) % 8}"}
                         for v in range(self.vfs_per_hca)]}
                for i, dev in enumerate(HCA_DEVICES)]

    def set_hca_vf_guid(self, device: str, vf_index: int, guid: str) -> None:
        """`state["hca_vf_guids"]["<device>/<n>"]` := the GUID, as the driver's sriov/<n>/{node,port} would hold
        it; "0x0" clears it. A VF this fake does not have (its own, `vfs_per_hca`, or those in `state["hca_vfs"]`,
        "<device>/<n>" a harness reports, e.g. `manage.py demo_agents`) is `hca_vf_not_found`."""
        known = self.state.get("hca_vfs") or [f"{p['device']}/{v['index']}" for p in self.hca_ports()
                                               for v in p["vfs"]]
        if f"{device}/{vf_index}" not in known:
            raise BackendError(f"{device} has no SR-IOV VF {vf_index}", "hca_vf_not_found")
        guids = self.state.setdefault("hca_vf_guids", {})
        if int(guid, 16):
            guids[f"{device}/{vf_index}"] = guid
        else:
            guids.pop(f"{device}/{vf_index}", None)
        self._save()

    # --- MIG ---------------------------------------------------------------------------------------------------
    def _check_index(self, index: int) -> str:
        if not 0 <= index < 8:
            raise BackendError(f"no GPU {index}", "NVML_ERROR_INVALID_ARGUMENT")
        return str(index)

    def set_mig_mode(self, index: int, enabled: bool) -> None:
        key = self._check_index(index)
        if not enabled and self.state["gis"][key]:
            raise BackendError("GPU instances exist; destroy them first", "NVML_ERROR_IN_USE")
        self.state["mig"][key] = enabled
        self._save()

    def gpu_instances(self, index: int) -> list[GpuInstanceInfo]:
        key = self._check_index(index)
        return [GpuInstanceInfo(**g) for g in sorted(self.state["gis"][key], key=lambda g: g["start"])]

    def create_gpu_instance(self, index: int, profile_id: int, start: int) -> GpuInstanceInfo:
        key = self._check_index(index)
        if not self.state["mig"][key]:
            raise BackendError("MIG mode is disabled", "NVML_ERROR_NOT_SUPPORTED")
        if profile_id not in GH100_PROFILES:
            raise BackendError(f"unknown profile {profile_id}", "NVML_ERROR_INVALID_ARGUMENT")
        size, compute, starts, maximum = GH100_PROFILES[profile_id]
        current = self.state["gis"][key]
        if start not in starts:
            raise BackendError(f"profile {profile_id} cannot be placed at {start}", "NVML_ERROR_INVALID_ARGUMENT")
        taken = {s for g in current for s in range(g["start"], g["start"] + g["size"])}
        used_compute = sum(GH100_PROFILES[g["profile_id"]][1] for g in current)
        if (taken & set(range(start, start + size)) or used_compute + compute > 7
                or sum(g["profile_id"] == profile_id for g in current) >= maximum):
            raise BackendError("Insufficient Resources", "NVML_ERROR_INSUFFICIENT_RESOURCES")
        gi = {"profile_id": profile_id, "start": start, "size": size, "gi_id": self.state["next_gi"]}
        self.state["next_gi"] += 1
        current.append(gi)
        self._save()
        return GpuInstanceInfo(**gi)

    def destroy_gpu_instance(self, index: int, start: int) -> None:
        key = self._check_index(index)
        before = len(self.state["gis"][key])
        self.state["gis"][key] = [g for g in self.state["gis"][key] if g["start"] != start]
        if len(self.state["gis"][key]) == before:
            raise BackendError(f"no GPU instance at {start}", "NVML_ERROR_NOT_FOUND")
        self._save()

    def reset_gpu(self, index: int) -> None:
        key = self._check_index(index)
        if self.state["gis"][key]:
            raise BackendError("GPU is in use", "NVML_ERROR_IN_USE")
        self.state["resets"][key] += 1
        self._save()

    def reset_vf(self, pci_address: str) -> None:
        """Count the reset of a VF this fake has: its own (`vfs_per_gpu`), or those in `state["vfs"]` (addresses a
        harness reports as the host's VFs, e.g. `manage.py demo_agents`)."""
        self._check_vf(pci_address)
        resets = self.state.setdefault("vf_resets", {})
        resets[pci_address] = resets.get(pci_address, 0) + 1
        self.state.setdefault("vf_types", {}).pop(pci_address, None)  # the reset clears the VF's vGPU type
        self._save()

    def _check_vf(self, pci_address: str) -> None:
        known = self.state.get("vfs") or [v["pci_address"] for g in self.gpus() for v in g.vfs]
        if pci_address not in known:
            raise BackendError(f"no SR-IOV VF {pci_address}", "vf_not_found")

    def set_vf_vgpu_type(self, pci_address: str, vgpu_type: str) -> None:
        """`state["vf_types"][address]` := the type, as the vendor VFIO `current_vgpu_type` would hold it; a VF with
        another type must be reset first (NVIDIA's driver refuses the write)."""
        self._check_vf(pci_address)
        types = self.state.setdefault("vf_types", {})
        if types.get(pci_address, vgpu_type) != vgpu_type:
            raise BackendError(f"VF {pci_address} has vGPU type {types[pci_address]}", "vf_vgpu_type_failed")
        types[pci_address] = vgpu_type
        self._save()

    def health_check(self, index: int) -> dict:
        self._check_index(index)
        return {"health": "ok", "checks": {"ecc_volatile_uncorrected": 0, "retired_pages_pending": False,
                                           "nvlink_active": 18, "pcie_link": "gen5 x16"}}

    # --- repair: return-to-service check and reboot --------------------------------------------------------------
    def set_diagnostics(self, result: str = "pass", errors: list[str] | None = None, times: int = 0) -> None:
        """What the next diagnostics answer (`times` of them, 0: every one until set again): ``result`` pass / fail
        / error and the errors the tool logged (a pass with errors is how DCGM reports a flaky GPU)."""
        self.state["diag"] = {"result": result, "errors": list(errors or []), "times": times}
        self._save()

    def diagnostics(self, gpu_indexes: list[int], level: int) -> dict:
        for i in gpu_indexes:
            self._check_index(i)
        diag = self.state.get("diag") or {"result": "pass", "errors": [], "times": 0}
        if diag.get("times"):
            diag["times"] -= 1
            if not diag["times"]:
                self.state["diag"] = None
        runs = self.state.setdefault("diag_runs", [])
        runs.append({"gpu_indexes": gpu_indexes, "level": level})
        self._save()
        return {"tool": "dcgm", "tool_version": "3.3.9", "driver_version": DRIVER_VERSION, "result": diag["result"],
                "errors": diag["errors"], "warnings": [], "exit_code": 0 if diag["result"] == "pass" else 226,
                "output_tail": f"fake dcgmi diag -r {level}: {diag['result']}"}

    def boot_id(self) -> str:
        return f"fake-boot-{self.host_id}-{self.state.get('boots', 0)}"

    def booted_at(self) -> str:
        return self.state.get("booted_at") or "2026-01-01T00:00:00+00:00"

    def reboot_host(self) -> None:
        """A reboot as the driver and the kernel see it: GPU instances and active partitions are gone (MIG mode
        stays), the SR-IOV VFs too (`sriov_numvfs` is 0 at boot) and with them their vGPU types, and no function
        is bound to vfio-pci. The PCI addresses in `state["lost"]` (set by a test) do not come back: enabling
        their VFs or binding them fails with `device_missing`."""
        self.state["boots"] = self.state.get("boots", 0) + 1
        self.state["booted_at"] = dt.datetime.now(dt.UTC).isoformat()
        self.state["gis"] = {k: [] for k in self.state["gis"]}
        self.state["active_partitions"] = []
        self.state["sriov"] = {**{pci: 0 for pci in self.state.get("sriov", {})},
                               **({f"0000:{b}:00.0": 0 for b in PCI_BUSES} if self.vfs_per_gpu else {})}
        self.state["vf_types"], self.state["vfio"] = {}, []
        self._save()

    def _check_present(self, pci_address: str) -> None:
        if pci_address in self.state.get("lost", []):
            raise BackendError(f"no PCI device {pci_address} (it did not come back)", "device_missing")

    def sriov_enable(self, pci_address: str, num_vfs: int) -> None:
        """`state["sriov"][address]` := the count, as `sriov_numvfs` would hold it (a GPU's VFs in `gpus()`)."""
        self._check_present(pci_address)
        self.state.setdefault("sriov", {})[pci_address] = num_vfs
        self._save()

    def vfio_bind(self, pci_address: str) -> None:
        self._check_present(pci_address)
        bound = self.state.setdefault("vfio", [])
        if pci_address not in bound:
            bound.append(pci_address)
        self._save()

    # --- Fabric Manager ----------------------------------------------------------------------------------------
    def partitions(self) -> dict:
        return {"supported": HGX_PARTITIONS, "active": sorted(self.state["active_partitions"])}

    def activate_partition(self, partition_id: int) -> None:
        part = next((p for p in HGX_PARTITIONS if p["id"] == partition_id), None)
        if part is None:
            raise BackendError(f"no partition {partition_id}", "FM_ST_BADPARAM")
        for active in self.state["active_partitions"]:
            other = next(p for p in HGX_PARTITIONS if p["id"] == active)
            if active != partition_id and set(other["gpus"]) & set(part["gpus"]):
                raise BackendError(f"partition {partition_id} overlaps active {active}", "FM_ST_IN_USE")
        if partition_id not in self.state["active_partitions"]:
            self.state["active_partitions"].append(partition_id)
        self._save()

    def deactivate_partition(self, partition_id: int) -> None:
        if partition_id not in self.state["active_partitions"]:
            raise BackendError(f"partition {partition_id} is not active", "FM_ST_PARTITION_NOT_ACTIVE")
        self.state["active_partitions"].remove(partition_id)
        self._save()

    # --- health signals (injected by tests and `gpucloud-agent inject`) ------------------------------------------
    def inject(self, kind: str, *, xid: int | None = None, gpu: int | None = None, hca_device: str = "",
               hca_port_number: int | None = None, nvswitch: str = "", nvswitch_port: int | None = None,
               count: int = 1, message: str = "", observed_at: str | None = None) -> dict:
        """Queue one health signal as the driver would raise it (an XID on a GPU, ECC counts, a port down, an SXid
        on an NVSwitch port: `nvswitch` is the switch's PCI address, one of `NVSWITCHES`).

        `observed_at` (ISO 8601) defaults to now; each signal gets a dedup key unique to this fake host, so the
        agent re-sending it after a lost answer is recorded once."""
        if gpu is not None:
            self._check_index(gpu)
        if hca_device and hca_device not in HCA_DEVICES:
            raise BackendError(f"no HCA device {hca_device}", code="not_found")
        if nvswitch and nvswitch not in NVSWITCHES:
            raise BackendError(f"no NVSwitch {nvswitch}", code="not_found")
        health = self.state["health"]
        health["seq"] += 1
        event = {"kind": kind, "xid": xid, "gpu_index": gpu, "hca_device": hca_device,
                 "hca_port_number": hca_port_number, "nvswitch": nvswitch, "nvswitch_port": nvswitch_port,
                 "count": count, "message": message,
                 "observed_at": observed_at or dt.datetime.now(dt.UTC).isoformat(),
                 "dedup_key": f"fake-{self.host_id}-{health['seq']}"}
        health["pending"].append(event)
        self._save()
        return event

    def inject_kernel_log(self, line: str) -> dict | None:
        """Queue what the NVML backend makes of one kernel log line (`kernel_log.sxid_parse`: an NVSwitch SXid
        line becomes ``nvswitch_fatal`` / ``nvswitch_nonfatal``); None for a line that is no signal."""
        from ..kernel_log import sxid_parse, sxid_signal

        sxid = sxid_parse(line)
        if sxid is None:
            return None
        sig = sxid_signal(sxid)
        return self.inject(sig.pop("kind"), **sig)

    def health_events(self) -> list[dict]:
        return [dict(e) for e in self.state["health"]["pending"]]

    def health_events_ack(self, dedup_keys: list[str]) -> None:
        done = set(dedup_keys)
        self.state["health"]["pending"] = [e for e in self.state["health"]["pending"] if e["dedup_key"] not in done]
        self._save()
