"""The real backend: NVML through nvidia-ml-py (`pynvml`), sysfs for HCA ports and host facts, `nvidia-smi` for
GPU reset and NVIDIA's `fmpm` (Fabric-Manager-Client) for NVSwitch partitions.

NVML calls used (NVML API Reference): device discovery (`nvmlDeviceGetUUID/Serial/Name/PciInfo/MemoryInfo/
ModuleId`), PCIe link (`nvmlDeviceGetCurr/MaxPcieLinkGeneration/Width`), ECC (`nvmlDeviceGetEccMode`), NVLink
(`nvmlDeviceGetNvLinkState`), MIG (`nvmlDeviceGet/SetMigMode`, `nvmlDeviceGetGpuInstanceProfileInfo`,
`nvmlDeviceCreateGpuInstanceWithPlacement`, `nvmlGpuInstanceCreateComputeInstance`, `nvmlGpuInstanceDestroy`).
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from .. import sysfs
from .base import BackendError, GpuInfo, GpuInstanceInfo

#: NVML device name -> gpucloud catalog key
MODEL_KEYS = {
    "NVIDIA A100-SXM4-40GB": "A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB": "A100-SXM4-80GB",
    "NVIDIA H100 80GB HBM3": "H100-SXM5-80GB", "NVIDIA H100 NVL": "H100-NVL-94GB",
    "NVIDIA H200": "H200-SXM-141GB", "NVIDIA L40S": "L40S", "NVIDIA B200": "B200",
}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlBackend:
    name = "nvml"

    def __init__(self, sysfs_root: str = "/sys", proc_root: str = "/proc", fmpm: str | None = None,
                 dev_root: str = "/dev"):
        try:
            import pynvml
        except ImportError as exc:  # pragma: no cover - depends on the host
            raise BackendError("nvidia-ml-py is not installed", "nvml_missing") from exc
        self.nv = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise BackendError(f"NVML init failed: {exc}", "NVML_ERROR_UNINITIALIZED") from exc
        self.sysfs_root, self.proc_root, self.dev_root = Path(sysfs_root), Path(proc_root), Path(dev_root)
        self.fmpm = fmpm or os.environ.get("GPUCLOUD_FMPM", "fmpm")
        #: the return-to-service check where DCGM is not installed (`gpucloud_agent.diagnostics`)
        self.validation_command = os.environ.get("GPUCLOUD_VALIDATION_COMMAND", "")

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except self.nv.NVMLError as exc:
            raise BackendError(str(exc), type(exc).__name__.replace("NVMLError_", "NVML_ERROR_").upper()) from exc

    def _opt(self, fn, *args, default=None):
        try:
            return fn(*args)
        except (self.nv.NVMLError, AttributeError):
            return default

    def _handle(self, index: int):
        return self._call(self.nv.nvmlDeviceGetHandleByIndex, index)

    def index_of(self, uuid: str) -> int | None:
        """The index NVML enumerates the GPU with this UUID at now, or None when the driver does not see it (bound
        to vfio-pci for a VM, or fallen off the bus). NVML's indexes count only the GPUs the driver holds, so an
        index the inventory recorded can name another GPU once one before it went to a VM."""
        for i in range(self._call(self.nv.nvmlDeviceGetCount)):
            handle = self._opt(self.nv.nvmlDeviceGetHandleByIndex, i)
            if handle is not None and _text(self._opt(self.nv.nvmlDeviceGetUUID, handle, default="")) == uuid:
                return i
        return None

    # --- discovery -------------------------------------------------------------------------------------------
    def host_facts(self) -> dict:
        facts = sysfs.host_facts(self.sysfs_root, self.proc_root)
        facts["driver_version"] = _text(self._call(self.nv.nvmlSystemGetDriverVersion))
        return facts

    def gpus(self) -> list[GpuInfo]:
        return [self._gpu(i) for i in range(self._call(self.nv.nvmlDeviceGetCount))]

    def _gpu(self, index: int) -> GpuInfo:
        nv, h = self.nv, self._handle(index)
        name = _text(self._call(nv.nvmlDeviceGetName, h))
        bus = _text(self._call(nv.nvmlDeviceGetPciInfo, h).busId).lower()
        pci = bus[-12:] if len(bus) > 12 else bus  # "00000000:1b:00.0" -> "0000:1b:00.0"
        ecc = self._opt(nv.nvmlDeviceGetEccMode, h, default=(None, None))
        mig = self._opt(nv.nvmlDeviceGetMigMode, h, default=(0, 0))
        links = active = 0
        for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
            state = self._opt(nv.nvmlDeviceGetNvLinkState, h, link)
            if state is None:
                continue
            links += 1
            active += int(state == 1)
        mig_on = bool(mig and mig[0] == getattr(nv, "NVML_DEVICE_MIG_ENABLE", 1))
        return GpuInfo(
            index=index, uuid=_text(self._call(nv.nvmlDeviceGetUUID, h)),
            serial=_text(self._opt(nv.nvmlDeviceGetSerial, h, default="")), name=name,
            model=MODEL_KEYS.get(name, ""), pci_address=pci, numa_node=sysfs.pci_numa_node(self.sysfs_root, pci),
            memory_mib=int(self._call(nv.nvmlDeviceGetMemoryInfo, h).total // (1024 * 1024)),
            module_id=int(self._opt(nv.nvmlDeviceGetModuleId, h, default=index + 1)),
            pcie={"generation": self._opt(nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
                  "width": self._opt(nv.nvmlDeviceGetCurrPcieLinkWidth, h),
                  "max_generation": self._opt(nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
                  "max_width": self._opt(nv.nvmlDeviceGetMaxPcieLinkWidth, h)},
            ecc={"enabled": None if ecc[0] is None else bool(ecc[0]),
                 "pending": None if ecc[1] is None else bool(ecc[1])},
            nvlink={"links": links, "active": active},
            mig={"enabled": mig_on, "layout": [vars(g) for g in self.gpu_instances(index)] if mig_on else []},
            vfs=sysfs.pci_virtual_functions(self.sysfs_root, pci))

    def hca_ports(self) -> list[dict]:
        return sysfs.hca_ports(self.sysfs_root)

    def set_hca_vf_guid(self, device: str, vf_index: int, guid: str) -> None:
        try:
            sysfs.hca_vf_set_guid(self.sysfs_root, device, vf_index, guid)
        except (OSError, ValueError) as exc:
            raise BackendError(str(exc), "hca_vf_guid_failed") from exc

    # --- MIG ---------------------------------------------------------------------------------------------------
    def set_mig_mode(self, index: int, enabled: bool) -> None:
        mode = self.nv.NVML_DEVICE_MIG_ENABLE if enabled else self.nv.NVML_DEVICE_MIG_DISABLE
        self._call(self.nv.nvmlDeviceSetMigMode, self._handle(index), mode)

    def _profiles(self, h) -> dict[int, object]:
        out = {}
        for i in range(self.nv.NVML_GPU_INSTANCE_PROFILE_COUNT):
            info = self._opt(self.nv.nvmlDeviceGetGpuInstanceProfileInfo, h, i)
            if info is not None:
                out[int(info.id)] = info
        return out

    def _gis(self, h):
        for pid in self._profiles(h):
            for gi in self._opt(self.nv.nvmlDeviceGetGpuInstances, h, pid, default=[]) or []:
                info = self._call(self.nv.nvmlGpuInstanceGetInfo, gi)
                yield gi, GpuInstanceInfo(profile_id=int(info.profileId), start=int(info.placement.start),
                                          size=int(info.placement.size), gi_id=int(info.id))

    def gpu_instances(self, index: int) -> list[GpuInstanceInfo]:
        return sorted((g for _, g in self._gis(self._handle(index))), key=lambda g: g.start)

    def create_gpu_instance(self, index: int, profile_id: int, start: int) -> GpuInstanceInfo:
        nv, h = self.nv, self._handle(index)
        info = self._profiles(h).get(profile_id)
        if info is None:
            raise BackendError(f"profile {profile_id} not supported", "NVML_ERROR_NOT_SUPPORTED")
        placement = nv.c_nvmlGpuInstancePlacement_t()
        placement.start, placement.size = start, self._placement_size(h, profile_id, start)
        gi = self._call(nv.nvmlDeviceCreateGpuInstanceWithPlacement, h, profile_id, placement)
        ci_profile = getattr(nv, f"NVML_COMPUTE_INSTANCE_PROFILE_{int(info.sliceCount)}_SLICE")
        ci_info = self._call(nv.nvmlGpuInstanceGetComputeInstanceProfileInfo, gi, ci_profile,
                             nv.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
        self._call(nv.nvmlGpuInstanceCreateComputeInstance, gi, ci_info.id)
        gi_info = self._call(nv.nvmlGpuInstanceGetInfo, gi)
        return GpuInstanceInfo(profile_id=profile_id, start=int(gi_info.placement.start),
                               size=int(gi_info.placement.size), gi_id=int(gi_info.id))

    def _placement_size(self, h, profile_id: int, start: int) -> int:
        for p in self._call(self.nv.nvmlDeviceGetGpuInstancePossiblePlacements, h, profile_id):
            if int(p.start) == start:
                return int(p.size)
        raise BackendError(f"profile {profile_id} cannot start at {start}", "NVML_ERROR_INVALID_ARGUMENT")

    def destroy_gpu_instance(self, index: int, start: int) -> None:
        nv = self.nv
        for gi, info in self._gis(self._handle(index)):
            if info.start != start:
                continue
            for ci_profile in range(nv.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
                ci_info = self._opt(nv.nvmlGpuInstanceGetComputeInstanceProfileInfo, gi, ci_profile,
                                    nv.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
                if ci_info is None:
                    continue
                for ci in self._opt(nv.nvmlGpuInstanceGetComputeInstances, gi, ci_info.id, default=[]) or []:
                    self._call(nv.nvmlComputeInstanceDestroy, ci)
            self._call(nv.nvmlGpuInstanceDestroy, gi)
            return
        raise BackendError(f"no GPU instance at {start}", "NVML_ERROR_NOT_FOUND")

    def reset_gpu(self, index: int) -> None:
        proc = subprocess.run(["nvidia-smi", "--gpu-reset", "-i", str(index)], capture_output=True, text=True,
                              timeout=120, check=False)
        if proc.returncode != 0:
            raise BackendError(proc.stdout.strip() or proc.stderr.strip(), "gpu_reset_failed")

    def reset_vf(self, pci_address: str) -> None:
        try:
            sysfs.pci_vf_reset(self.sysfs_root, pci_address)
        except OSError as exc:
            raise BackendError(f"VF {pci_address} reset failed: {exc}", "vf_reset_failed") from exc

    def set_vf_vgpu_type(self, pci_address: str, vgpu_type: str) -> None:
        try:
            sysfs.pci_vf_set_vgpu_type(self.sysfs_root, pci_address, vgpu_type)
        except LookupError as exc:
            raise BackendError(str(exc), "vgpu_type_not_creatable") from exc
        except (OSError, ValueError) as exc:
            raise BackendError(f"VF {pci_address}: setting vGPU type {vgpu_type} failed: {exc}",
                               "vf_vgpu_type_failed") from exc

    def sriov_enable(self, pci_address: str, num_vfs: int) -> None:
        try:
            sysfs.pci_sriov_enable(self.sysfs_root, pci_address, num_vfs)
        except FileNotFoundError as exc:
            raise BackendError(f"{pci_address}: {exc}", "device_missing") from exc
        except (OSError, ValueError) as exc:
            raise BackendError(f"{pci_address}: enabling {num_vfs} VFs failed: {exc}", "sriov_enable_failed") from exc

    def vfio_bind(self, pci_address: str) -> None:
        try:
            sysfs.pci_bind_vfio(self.sysfs_root, pci_address)
        except FileNotFoundError as exc:
            raise BackendError(f"{pci_address}: {exc}", "device_missing") from exc
        except (OSError, ValueError) as exc:
            raise BackendError(f"{pci_address}: binding to vfio-pci failed: {exc}", "vfio_bind_failed") from exc

    def health_check(self, index: int) -> dict:
        nv, h = self.nv, self._handle(index)
        uncorrected = self._opt(nv.nvmlDeviceGetTotalEccErrors, h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                nv.NVML_VOLATILE_ECC, default=0)
        pending = self._opt(nv.nvmlDeviceGetRetiredPagesPendingStatus, h, default=0)
        gpu = self._gpu(index)
        checks = {"ecc_volatile_uncorrected": int(uncorrected or 0), "retired_pages_pending": bool(pending),
                  "nvlink_active": gpu.nvlink["active"], "pcie_link": f"gen{gpu.pcie['generation']} "
                  f"x{gpu.pcie['width']}"}
        degraded = gpu.nvlink["active"] < gpu.nvlink["links"] or bool(pending)
        health = "faulty" if checks["ecc_volatile_uncorrected"] else ("degraded" if degraded else "ok")
        return {"health": health, "checks": checks}

    # --- repair: return-to-service check and reboot --------------------------------------------------------------
    def diagnostics(self, gpu_indexes: list[int], level: int) -> dict:
        from ..diagnostics import run_check

        out = run_check(gpu_indexes, level, self.validation_command)
        driver = self._opt(self.nv.nvmlSystemGetDriverVersion, default="")
        return {**out, "driver_version": _text(driver) if driver else ""}

    def boot_id(self) -> str:
        return (self.proc_root / "sys/kernel/random/boot_id").read_text().strip()

    def booted_at(self) -> str:
        import datetime as dt

        btime = re.search(r"^btime (\d+)$", (self.proc_root / "stat").read_text(), re.M)
        if btime is None:
            raise OSError("no btime in /proc/stat")
        return dt.datetime.fromtimestamp(int(btime.group(1)), dt.UTC).isoformat()

    def reboot_host(self) -> None:  # pragma: no cover - reboots the machine
        import time

        proc = subprocess.run(["systemctl", "reboot"], capture_output=True, text=True, timeout=60, check=False)
        if proc.returncode != 0:
            raise BackendError(proc.stderr.strip() or "systemctl reboot failed", "reboot_failed")
        time.sleep(600)  # the reboot kills this process; still here after 10 minutes: it did not happen

    # --- Fabric Manager (NVIDIA Fabric-Manager-Client `fmpm`) ---------------------------------------------------
    def _fmpm(self, *args: str) -> str:
        try:
            proc = subprocess.run([self.fmpm, *args], capture_output=True, text=True, timeout=60, check=False)
        except FileNotFoundError as exc:
            raise BackendError("fmpm (Fabric Manager partition tool) not found", "fm_missing") from exc
        if proc.returncode != 0:
            raise BackendError(proc.stderr.strip() or proc.stdout.strip(), "fm_error")
        return proc.stdout

    def partitions(self) -> dict:
        try:
            text = self._fmpm("-l")
        except BackendError:
            return {}
        active = [int(m) for m in re.findall(r'"partitionId"\s*:\s*(\d+)[^}]*?"isActive"\s*:\s*1', text)]
        return {"supported": [], "active": sorted(active)}

    def activate_partition(self, partition_id: int) -> None:
        self._fmpm("-a", str(partition_id))

    def deactivate_partition(self, partition_id: int) -> None:
        self._fmpm("-d", str(partition_id))

    # --- health signals (docs/health.md, "Signals") -------------------------------------------------------------
    #: clock event reasons that mean a thermal or hardware slowdown (NVML nvmlClocksEventReason*: HW slowdown,
    #: SW thermal, HW thermal, HW power brake)
    THERMAL_REASONS = 0x08 | 0x20 | 0x40 | 0x80

    def _signal(self, kind: str, key: str, *, gpu: int | None, xid: int | None = None, count: int = 1,
                message: str = "", hca_device: str = "", hca_port_number: int | None = None, nvswitch: str = "",
                nvswitch_port: int | None = None) -> None:
        import datetime as dt

        pending = self.__dict__.setdefault("_pending", {})
        if key in pending or key in self.__dict__.setdefault("_acked", set()):
            return
        pending[key] = {"kind": kind, "xid": xid, "gpu_index": gpu, "hca_device": hca_device,
                        "hca_port_number": hca_port_number, "nvswitch": nvswitch, "nvswitch_port": nvswitch_port,
                        "count": count, "message": message[:500],
                        "observed_at": dt.datetime.now(dt.UTC).isoformat(), "dedup_key": key[:128]}

    def _boot(self) -> str:
        try:
            return self.boot_id()[:8]
        except OSError:
            return "noboot"

    def _xid_events(self) -> None:
        """Drain the XID event set (nvmlEventTypeXidCriticalError on every GPU, registered once)."""
        nv = self.nv
        if "_event_set" not in self.__dict__:
            self._event_set = self._opt(nv.nvmlEventSetCreate)
            for index in range(self._call(nv.nvmlDeviceGetCount)):
                if self._event_set is not None:
                    self._opt(nv.nvmlDeviceRegisterEvents, self._handle(index), nv.nvmlEventTypeXidCriticalError,
                              self._event_set)
        if self._event_set is None:
            return
        seq = self.__dict__.setdefault("_xid_seq", 0)
        while True:
            try:
                data = nv.nvmlEventSetWait_v2(self._event_set, 0)
            except nv.NVMLError:  # NVML_ERROR_TIMEOUT: nothing more now
                return
            if not int(data.eventType) & int(nv.nvmlEventTypeXidCriticalError):
                continue
            index = int(self._opt(nv.nvmlDeviceGetIndex, data.device, default=-1))
            seq += 1
            self._xid_seq = seq
            self._signal("xid", f"nvml-{self._boot()}-xid-{index}-{int(data.eventData)}-{seq}",
                         gpu=index if index >= 0 else None, xid=int(data.eventData))

    def _device_signals(self, index: int) -> dict:
        """Read one GPU's counters and states; queue a signal for each fault; return what was read."""
        nv = self.nv
        try:
            h = nv.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(nv.nvmlDeviceGetUUID(h))
        except nv.NVMLError as exc:
            if "lost" in str(exc).lower():
                self._signal("fallen_off_bus", f"nvml-{self._boot()}-lost-{index}", gpu=index, message=str(exc))
            return {"index": index, "error": str(exc)}
        read = {"index": index, "uuid": uuid}
        for kind, etype in (("ecc_dbe", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"),
                            ("ecc_sbe", "NVML_MEMORY_ERROR_TYPE_CORRECTED")):
            total = self._opt(nv.nvmlDeviceGetTotalEccErrors, h, getattr(nv, etype), nv.NVML_VOLATILE_ECC)
            read[kind] = total
            seen = self.__dict__.setdefault("_ecc_seen", {}).get((uuid, kind), 0)
            if total is not None and int(total) > seen:  # volatile: since the driver loaded; keyed by the total
                self._ecc_seen[(uuid, kind)] = int(total)
                self._signal(kind, f"nvml-{uuid}-{kind}-{self._boot()}-{int(total)}", gpu=index,
                             count=int(total) - seen)
        remap = self._opt(nv.nvmlDeviceGetRemappedRows, h)
        read["row_remap"] = list(remap) if remap is not None else None
        if remap is not None and bool(remap[3]):
            self._signal("row_remap_failure", f"nvml-{uuid}-row-remap-failure", gpu=index)
        down = []
        for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
            state = self._opt(nv.nvmlDeviceGetNvLinkState, h, link)
            if state is not None and int(state) != 1:
                down.append(link)
        read["nvlink_down"] = down
        if down:
            self._signal("nvlink_down", f"nvml-{uuid}-nvlink-{self._boot()}-{'.'.join(map(str, down))}", gpu=index,
                         count=len(down), message=f"NVLink links down: {down}")
        pcie = (self._opt(nv.nvmlDeviceGetCurrPcieLinkGeneration, h), self._opt(nv.nvmlDeviceGetCurrPcieLinkWidth, h),
                self._opt(nv.nvmlDeviceGetMaxPcieLinkGeneration, h), self._opt(nv.nvmlDeviceGetMaxPcieLinkWidth, h))
        read["pcie"] = list(pcie)
        if None not in pcie and (pcie[0] < pcie[2] or pcie[1] < pcie[3]):
            # an idle GPU may train its link down to save power: only the width is a fault on its own
            if pcie[1] < pcie[3]:
                self._signal("pcie_degraded", f"nvml-{uuid}-pcie-{self._boot()}-x{pcie[1]}", gpu=index,
                             message=f"PCIe gen{pcie[0]} x{pcie[1]} of gen{pcie[2]} x{pcie[3]}")
        reasons = self._opt(getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
                            or nv.nvmlDeviceGetCurrentClocksThrottleReasons, h)
        read["clock_event_reasons"] = reasons
        throttled = self.__dict__.setdefault("_throttled", set())
        if reasons is not None and int(reasons) & self.THERMAL_REASONS:
            if uuid not in throttled:
                throttled.add(uuid)
                import time

                self._signal("thermal", f"nvml-{uuid}-thermal-{int(time.time())}", gpu=index,
                             message=f"clock event reasons 0x{int(reasons):x}")
        else:
            throttled.discard(uuid)
        read["fabric"] = self._fabric_signal(index, uuid, h)
        read["temperature_c"] = self._opt(nv.nvmlDeviceGetTemperature, h, getattr(nv, "NVML_TEMPERATURE_GPU", 0))
        read["power_mw"] = self._opt(nv.nvmlDeviceGetPowerUsage, h)
        return read

    #: how long a GPU's fabric registration may stay NOT_STARTED / IN_PROGRESS before it is a fault (Fabric Manager
    #: registers the GPUs within seconds of starting; ours)
    FABRIC_GRACE_S = 300
    #: the Fabric Manager systemd unit (NVIDIA's packages: nvidia-fabricmanager)
    FM_SERVICE = "nvidia-fabricmanager"

    def _fabric_signal(self, index: int, uuid: str, h) -> dict | None:
        """The GPU's fabric registration (NVML `nvmlDeviceGetGpuFabricInfo`, Hopper and later on NVSwitch systems):
        {"state": NOT_SUPPORTED | NOT_STARTED | IN_PROGRESS | COMPLETED, "status": the registration's NVML return
        code (0: success)}, None where NVML has no such call. Queues ``fabric_incomplete`` when the registration
        COMPLETED with an error status, or stayed unfinished for `FABRIC_GRACE_S`; once until it completes."""
        import ctypes
        import time

        nv = self.nv
        cls, fn = getattr(nv, "c_nvmlGpuFabricInfo_t", None), getattr(nv, "nvmlDeviceGetGpuFabricInfo", None)
        if cls is None or fn is None:
            return None
        info = cls()
        try:
            fn(h, ctypes.byref(info))
        except nv.NVMLError as exc:
            return {"error": str(exc)}
        names = {0: "NOT_SUPPORTED", 1: "NOT_STARTED", 2: "IN_PROGRESS", 3: "COMPLETED"}
        state, status = int(info.state), int(info.status)
        read = {"state": names.get(state, str(state)), "status": status}
        waiting = self.__dict__.setdefault("_fabric_since", {})
        reported = self.__dict__.setdefault("_fabric_reported", set())
        if state == 0 or (state == 3 and status == 0):  # no fabric here, or registered
            waiting.pop(uuid, None)
            reported.discard(uuid)
            return read
        since = waiting.setdefault(uuid, time.monotonic())
        if uuid not in reported and (state == 3 or time.monotonic() - since >= self.FABRIC_GRACE_S):
            reported.add(uuid)
            self._signal("fabric_incomplete", f"nvml-{uuid}-fabric-{self._boot()}-{int(time.time())}", gpu=index,
                         message=f"GPU fabric state {read['state']}, status {status}")
        return read

    def _fabric_manager(self, nvswitch_system: bool) -> str | None:
        """The Fabric Manager service's state (`systemctl is-active`: active, inactive, failed, activating, ...) on
        an NVSwitch system, else None. Queues ``fabric_manager_down`` when it is not active, once per time."""
        import time

        if not nvswitch_system:
            return None
        service = os.environ.get("GPUCLOUD_FM_SERVICE", self.FM_SERVICE)
        try:
            proc = subprocess.run(["systemctl", "is-active", service], capture_output=True, text=True, timeout=10,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        state = proc.stdout.strip() or "unknown"
        if state == "active":
            self.__dict__.pop("_fm_down", None)
        elif "_fm_down" not in self.__dict__:
            self._fm_down = int(time.time())
            self._signal("fabric_manager_down", f"nvml-{self._boot()}-fm-{self._fm_down}", gpu=None,
                         message=f"{service}: {state}")
        return state

    def _sxid_events(self) -> dict:
        """New NVSwitch SXid lines of the kernel log (`kernel_log`): ``nvswitch_fatal`` / ``nvswitch_nonfatal`` on the
        switch (its PCI address) and port (the link the driver names), SXid number in `xid`; keyed by the boot and
        the record's sequence number, so a restarted agent re-reading the log re-sends the same keys."""
        from ..kernel_log import KmsgReader, sxid_parse, sxid_signal

        reader = self.__dict__.get("_kmsg")
        if reader is None:
            reader = self._kmsg = KmsgReader(Path(getattr(self, "dev_root", "/dev")) / "kmsg")
        seen = 0
        for seq, text in reader.read():
            sxid = sxid_parse(text)
            if sxid is None:
                continue
            seen += 1
            sig = sxid_signal(sxid)
            self._signal(sig.pop("kind"), f"nvml-{self._boot()}-sxid-{seq}", gpu=None, **sig)
        return {"sxid_lines": seen, "error": reader.error}

    def _ib_signals(self) -> list[dict]:
        """InfiniBand ports from sysfs through `ib_watch.IbPortWatch` (port down, link flaps, error counters, rate)."""
        from ..ib_watch import IbPortWatch

        ports = sysfs.ib_port_health(self.sysfs_root)
        for sig in self.__dict__.setdefault("_ib_watch", IbPortWatch()).poll(ports):
            self._signal(sig["kind"], f"ib-{self._boot()}-{sig['hca_device']}-{sig['hca_port_number']}-{sig['ref']}",
                         gpu=None, count=sig["count"], message=sig["message"], hca_device=sig["hca_device"],
                         hca_port_number=sig["hca_port_number"])
        return ports

    def health_read(self) -> list[dict]:
        """Collect now (XID events, every GPU's counters and states, NVSwitch SXids, Fabric Manager, InfiniBand
        ports) and return what was read per GPU; what was read for the host is kept in `host_read` ({"sxid",
        "fabric_manager", "ib_ports"}; `agent/tools/nvml_check.py` prints both)."""
        self._xid_events()
        gpus = [self._device_signals(i) for i in range(self._call(self.nv.nvmlDeviceGetCount))]
        nvswitch_system = any((g.get("fabric") or {}).get("state") not in (None, "NOT_SUPPORTED") for g in gpus) or \
            (Path(getattr(self, "dev_root", "/dev")) / "nvidia-nvswitchctl").exists()
        self.host_read = {"sxid": self._sxid_events(), "fabric_manager": self._fabric_manager(nvswitch_system),
                          "ib_ports": self._ib_signals()}
        return gpus

    def health_events(self) -> list[dict]:
        """Signals from NVML not yet acknowledged, oldest first (collected on each call): XID events (event set),
        volatile ECC uncorrected / corrected counts (keyed by the running total, so a restart re-reports the same
        key, which the control plane de-duplicates), row remapping failure, NVLink links not active, PCIe link
        narrower than its maximum, thermal or hardware slowdown (on entering it), a GPU that is lost, a GPU fabric
        registration that did not complete, Fabric Manager not active, NVSwitch SXids from the kernel log, and
        InfiniBand port down / link flaps / error counter increases / rate below the host's fastest port."""
        self.health_read()
        return [dict(e) for e in self.__dict__.get("_pending", {}).values()]

    def health_events_ack(self, dedup_keys: list[str]) -> None:
        pending = self.__dict__.setdefault("_pending", {})
        for key in dedup_keys:
            if pending.pop(key, None) is not None:
                self.__dict__.setdefault("_acked", set()).add(key)
