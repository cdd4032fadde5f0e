"""The interface every GPU backend implements (NVML or fake). Plain dicts/dataclasses in and out."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Protocol


class BackendError(Exception):
    """A driver/NVML/Fabric Manager call failed. `code` mirrors the NVML error name where there is one."""

    def __init__(self, message: str, code: str = "backend_error", details: dict | None = None):
        super().__init__(message)
        self.code = code
        self.details = details or {}  # reported with the code, e.g. the layout read back after a rollback


@dataclass
class GpuInstanceInfo:
    profile_id: int
    start: int
    size: int
    gi_id: int


@dataclass
class GpuInfo:
    index: int
    uuid: str
    serial: str
    name: str                  # NVML device name, e.g. "NVIDIA H100 80GB HBM3"
    model: str                 # gpucloud catalog key, e.g. "H100-SXM5-80GB" ("" when unknown)
    pci_address: str
    numa_node: int
    memory_mib: int
    module_id: int             # HGX module id = Fabric Manager GPU physical id
    pcie: dict = field(default_factory=dict)     # {"generation": 5, "width": 16, "max_generation": 5, "max_width": 16}
    ecc: dict = field(default_factory=dict)      # {"enabled": True, "pending": True}
    nvlink: dict = field(default_factory=dict)   # {"links": 18, "active": 18}
    mig: dict = field(default_factory=dict)      # {"enabled": bool, "layout": [GpuInstanceInfo as dict]}
    vfs: list = field(default_factory=list)      # SR-IOV VFs: [{"index": 0, "pci_address": "0000:1b:00.4"}]

    def as_dict(self) -> dict:
        return asdict(self)


class GpuBackend(Protocol):
    name: str

    def host_facts(self) -> dict:
        """{"cpu_sockets", "cpu_cores", "cpu_threads", "memory_mib", "numa_nodes", "driver_version"}."""

    def gpus(self) -> list[GpuInfo]: ...

    def set_mig_mode(self, index: int, enabled: bool) -> None: ...

    def gpu_instances(self, index: int) -> list[GpuInstanceInfo]: ...

    def create_gpu_instance(self, index: int, profile_id: int, start: int) -> GpuInstanceInfo:
        """Create a GPU instance (and one full-size compute instance in it) at memory slice `start`."""

    def destroy_gpu_instance(self, index: int, start: int) -> None: ...

    def reset_gpu(self, index: int) -> None: ...

    def reset_vf(self, pci_address: str) -> None:
        """Clear the SR-IOV VF's vGPU and reset the function (the scrub of a vGPU on a VF)."""

    def set_vf_vgpu_type(self, pci_address: str, vgpu_type: str) -> None:
        """Give an SR-IOV VF a vGPU type (catalog name) before its VM starts; `reset_vf` clears it."""

    def sriov_enable(self, pci_address: str, num_vfs: int) -> None:
        """Enable `num_vfs` SR-IOV VFs on a physical function (a GPU's or an HCA's) again after a reboot."""

    def vfio_bind(self, pci_address: str) -> None:
        """Bind a PCI function a VM gets by passthrough to vfio-pci again after a reboot."""

    def health_check(self, index: int) -> dict:
        """{"health": "ok" | "degraded" | "faulty", "checks": {...}}."""

    def diagnostics(self, gpu_indexes: list[int], level: int) -> dict:
        """The return-to-service check (`gpucloud_agent.diagnostics`: DCGM, else the validation command):
        {"tool", "tool_version", "driver_version", "result", "errors", "warnings", "exit_code", "output_tail"}."""

    def boot_id(self) -> str:
        """This boot's id (Linux: /proc/sys/kernel/random/boot_id): a reboot changes it."""

    def booted_at(self) -> str:
        """When this boot began, ISO 8601 UTC (Linux: `btime` of /proc/stat)."""

    def reboot_host(self) -> None:
        """Reboot the host (returns only if the reboot did not happen, raising BackendError)."""

    def partitions(self) -> dict:
        """Fabric Manager state: {"supported": [{"id", "gpus"}], "active": [ids]} ({} without NVSwitch)."""

    def activate_partition(self, partition_id: int) -> None: ...

    def deactivate_partition(self, partition_id: int) -> None: ...

    def hca_ports(self) -> list[dict]:
        """[{"device", "port_number", "port_guid", "lid", "rate_gbps", "state", "pci_address", "vfs": [{"index",
        "pci_address"}]}] (sysfs in the nvml backend)."""

    def set_hca_vf_guid(self, device: str, vf_index: int, guid: str) -> None:
        """Give an HCA SR-IOV VF its node/port GUID before its VM starts ("0x0" clears it: the scrub)."""

    def health_events(self) -> list[dict]:
        """Health signals observed and not yet acknowledged, oldest first: [{"kind", "xid", "gpu_index",
        "hca_device", "hca_port_number", "nvswitch", "nvswitch_port", "count", "observed_at", "dedup_key",
        "message"}] (the control plane's POST /api/v1/agent/health-events body; `dedup_key` stable across re-sends;
        `xid` carries the SXid number of the NVSwitch kinds, `nvswitch` the switch's PCI address)."""

    def health_events_ack(self, dedup_keys: list[str]) -> None:
        """Forget signals the control plane has recorded."""
