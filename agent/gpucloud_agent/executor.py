"""Execute control-plane commands on a backend, at most once per command id.

The journal (a JSON file in the state directory, or memory) maps command id -> outcome. A command whose id is in
the journal is not executed again; its stored outcome is reported again (the control plane may re-send a command
whose first report was lost). Each command is also idempotent on the device: creating a GPU instance that already
exists at that start with that profile, or activating an active partition, succeeds without a change.
"""
from __future__ import annotations

import json
from pathlib import Path

from .backends.base import BackendError, GpuBackend


class Journal:
    def __init__(self, path: Path | None = None):
        self.path = path
        self.entries: dict[str, dict] = {}
        if path and path.exists():
            self.entries = json.loads(path.read_text())

    def get(self, command_id: str) -> dict | None:
        return self.entries.get(command_id)

    def put(self, command_id: str, outcome: dict) -> None:
        self.entries[command_id] = outcome
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.entries))
            tmp.replace(self.path)


class Executor:
    def __init__(self, backend: GpuBackend, journal: Journal | None = None):
        self.backend, self.journal = backend, journal or Journal()
        self.executions = 0  # how many commands actually ran (tests assert repeats do not)

    def execute(self, command: dict) -> dict:
        """-> {"succeeded": bool, "result": {...}, "error": str}; never raises for a device error."""
        stored = self.journal.get(command["id"])
        if stored is not None:
            return stored
        handler = getattr(self, f"_{command['kind']}", None)
        self._command_id = command["id"]
        try:
            if handler is None:
                raise BackendError(f"unknown command kind {command['kind']!r}", "unknown_command")
            outcome = {"succeeded": True, "result": handler(self._located(command["payload"])), "error": ""}
        except BackendError as exc:
            outcome = {"succeeded": False, "result": {**exc.details, "code": exc.code}, "error": str(exc)}
        self.executions += 1
        self.journal.put(command["id"], outcome)
        return outcome

    def _located(self, payload: dict) -> dict:
        """The payload with `gpu_index` where the GPU named by `gpu_uuid` is now. The control plane names a GPU by
        the index the agent reported and by its UUID; a backend that can look a UUID up (`index_of`: NVML, whose
        indexes skip the GPUs bound to vfio-pci for VMs) is asked, so a reset, a health check or a MIG change never
        lands on another GPU than the one meant. Raises BackendError `gpu_not_visible` when the driver does not see
        that GPU (nothing is done to any GPU)."""
        index_of = getattr(self.backend, "index_of", None)
        uuid = payload.get("gpu_uuid")
        if index_of is None or not uuid or not isinstance(payload.get("gpu_index"), int):
            return payload
        index = index_of(uuid)
        if index is None:
            raise BackendError(f"GPU {uuid} (index {payload['gpu_index']} in the inventory) is not visible to the "
                               "driver; nothing was done to any GPU", "gpu_not_visible")
        return {**payload, "gpu_index": index}

    def _layout(self, index: int) -> list[dict]:
        return [vars(g) for g in self.backend.gpu_instances(index)]

    def _mig_enabled(self, index: int) -> bool:
        return any(g.get("index") == index and g.get("mig", {}).get("enabled")
                   for g in (x.as_dict() for x in self.backend.gpus()))

    def _reslice(self, index: int, layout: list[dict]) -> None:
        """Make GPU `index`'s GPU instances exactly `layout` ([{profile_id, start, size}]): destroy the others,
        then create the missing ones, largest first."""
        target = {(i["profile_id"], i["start"]) for i in layout}
        for gi in self.backend.gpu_instances(index):
            if (gi.profile_id, gi.start) not in target:
                self.backend.destroy_gpu_instance(index, gi.start)
        have = {(g.profile_id, g.start) for g in self.backend.gpu_instances(index)}
        for item in sorted(layout, key=lambda i: (-i["size"], i["start"])):
            if (item["profile_id"], item["start"]) not in have:
                self.backend.create_gpu_instance(index, item["profile_id"], item["start"])

    def _apply_mig_layout(self, p: dict) -> dict:
        """Transactional: note the GPU's MIG mode and layout, apply the new layout, read it back and compare it
        with the asked one; on any device error or a read-back that differs, put the previous layout (and MIG
        mode) back and fail with the error's code (`mig_layout_mismatch` for a wrong read-back), reporting
        `rolled_back` and the layout read after the rollback. -> {"layout": [...]} (read back)."""
        index = p["gpu_index"]
        target = {(i["profile_id"], i["start"]) for i in p["layout"]}
        was_enabled = self._mig_enabled(index)
        previous = [vars(g) for g in self.backend.gpu_instances(index)] if was_enabled else []
        try:
            if not was_enabled:
                self.backend.set_mig_mode(index, True)
            self._reslice(index, p["layout"])
            got = {(g.profile_id, g.start) for g in self.backend.gpu_instances(index)}
            if got != target:
                raise BackendError(f"GPU {index} reads back GPU instances {sorted(got)}, not {sorted(target)}",
                                   "mig_layout_mismatch")
        except BackendError as exc:
            rolled_back, detail = True, ""
            try:
                self._reslice(index, previous)
                if not was_enabled:
                    self._mig_mode_back_off(index)
                rolled_back = {(g.profile_id, g.start) for g in self.backend.gpu_instances(index)} == {
                    (g["profile_id"], g["start"]) for g in previous} and self._mig_enabled(index) == was_enabled
            except BackendError as again:
                rolled_back, detail = False, f"; the rollback failed too: {again}"
            raise BackendError(f"{exc}{detail}", exc.code, {
                "rolled_back": rolled_back, "previous_layout": previous, "layout": self._layout(index),
                "mig_enabled": self._mig_enabled(index)}) from exc
        return {"layout": self._layout(index)}

    def _mig_mode_back_off(self, index: int) -> None:
        """Turn MIG mode off again on a GPU the apply had turned it on for. The driver may only mark the change
        pending (NVML `nvmlDeviceSetMigMode` answers an activation status; a pending mode takes effect at the
        next GPU reset, MIG User Guide "Enable MIG Mode"): the current mode is read back and, while it is still
        on and the GPU has no GPU instance left, the GPU is reset so the rollback does not leave MIG mode on.
        Raises BackendError (`mig_mode_not_restored`) when it stays on."""
        self.backend.set_mig_mode(index, False)
        if self._mig_enabled(index) and not self.backend.gpu_instances(index):
            self.backend.reset_gpu(index)
        if self._mig_enabled(index):
            raise BackendError(f"GPU {index} is still in MIG mode after turning it off", "mig_mode_not_restored")

    def _create_gpu_instance(self, p: dict) -> dict:
        index = p["gpu_index"]
        existing = next((g for g in self.backend.gpu_instances(index) if g.start == p["start"]), None)
        if existing is not None and existing.profile_id == p["profile_id"]:
            gi = existing
        else:
            gi = self.backend.create_gpu_instance(index, p["profile_id"], p["start"])
        return {"start": gi.start, "gi_id": gi.gi_id, "layout": self._layout(index)}

    def _destroy_gpu_instance(self, p: dict) -> dict:
        index = p["gpu_index"]
        if any(g.start == p["start"] for g in self.backend.gpu_instances(index)):
            self.backend.destroy_gpu_instance(index, p["start"])
        return {"layout": self._layout(index)}

    def _reset_gpu(self, p: dict) -> dict:
        self.backend.reset_gpu(p["gpu_index"])
        return self.backend.health_check(p["gpu_index"])

    def _reset_vf(self, p: dict) -> dict:
        self.backend.reset_vf(p["vf_address"])
        return self.backend.health_check(p["gpu_index"])

    def _set_vf_vgpu_type(self, p: dict) -> dict:
        self.backend.set_vf_vgpu_type(p["vf_address"], p["vgpu_type"])
        return {"vf_address": p["vf_address"], "vgpu_type": p["vgpu_type"]}

    def _set_hca_vf_guid(self, p: dict) -> dict:
        self.backend.set_hca_vf_guid(p["device"], p["vf_index"], p["guid"])
        return {"device": p["device"], "vf_index": p["vf_index"], "guid": p["guid"]}

    def _run_diagnostics(self, p: dict) -> dict:
        return self.backend.diagnostics(list(p.get("gpu_indexes") or []), int(p.get("level", 2)))

    def _reboot_host(self, p: dict) -> dict:
        """Two phases across the reboot: record this boot's id under the command (journal key ``reboot:<id>``),
        then reboot. The process dies with the host; after it comes back the control plane sends the command
        again (it was never reported), the boot id differs, and the command succeeds. Same boot id after the
        backend returned: the reboot did not happen (failure)."""
        key = f"reboot:{self._command_id}"
        marker = self.journal.get(key)
        current = self.backend.boot_id()
        if marker is None:
            self.journal.put(key, {"boot_id": current})
            self.backend.reboot_host()
            current = self.backend.boot_id()
            marker = {"boot_id": self.journal.get(key)["boot_id"]}
        if current == marker["boot_id"]:
            raise BackendError("the host did not reboot (same boot id)", "reboot_not_observed")
        return {"previous_boot_id": marker["boot_id"], "boot_id": current}

    def _restore_devices(self, p: dict) -> dict:
        """After a host reboot, put back what the kernel forgot: the SR-IOV VFs of each physical function
        (`sriov`: [{"pci_address", "num_vfs"}]) and the vfio-pci binding of each function a VM gets by passthrough
        (`vfio`: [{"pci_address"}]). Every device is tried; those that fail are reported, each with its code
        (`device_missing`: the device did not come back). -> {"restored": [address], "missing": []}; raises
        BackendError `devices_missing` with {"restored", "missing": [{"pci_address", "step", "code", "error"}]}
        when any failed. (MIG GPU instances come back through `apply_mig_layout`, vGPU types through
        `set_vf_vgpu_type`, both queued by the control plane.)"""
        restored, missing = [], []
        steps = [("sriov", d["pci_address"], lambda d=d: self.backend.sriov_enable(d["pci_address"], d["num_vfs"]))
                 for d in p.get("sriov") or []]
        steps += [("vfio", d["pci_address"], lambda d=d: self.backend.vfio_bind(d["pci_address"]))
                  for d in p.get("vfio") or []]
        for step, address, run in steps:
            try:
                run()
                restored.append(address)
            except BackendError as exc:
                missing.append({"pci_address": address, "step": step, "code": exc.code, "error": str(exc)})
        if missing:
            raise BackendError(f"{len(missing)} device(s) did not come back: "
                               + ", ".join(m["pci_address"] for m in missing), "devices_missing",
                               {"restored": restored, "missing": missing})
        return {"restored": restored, "missing": []}

    def _activate_partition(self, p: dict) -> dict:
        if p["partition_id"] not in self.backend.partitions().get("active", []):
            self.backend.activate_partition(p["partition_id"])
        return {"active_partitions": self.backend.partitions().get("active", [])}

    def _deactivate_partition(self, p: dict) -> dict:
        if p["partition_id"] in self.backend.partitions().get("active", []):
            self.backend.deactivate_partition(p["partition_id"])
        return {"active_partitions": self.backend.partitions().get("active", [])}
