"""The NVML backend's health signal collection against an NVML simulator (no GPU here): the calls and constants
are nvidia-ml-py's (`pynvml`), the values what a driver reports for each fault. On a GPU host,
`agent/tools/nvml_check.py --signals` prints what the real driver reads."""
from __future__ import annotations

from types import SimpleNamespace

from gpucloud_agent.backends.nvml import NvmlBackend


class NVMLError(Exception):
    pass


class Sim:
    """The subset of pynvml the collection calls, over a mutable per-GPU state."""

    NVMLError = NVMLError
    NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC = 0, 1, 0
    NVML_NVLINK_MAX_LINKS, NVML_TEMPERATURE_GPU = 18, 0
    nvmlEventTypeXidCriticalError = 0x8

    def __init__(self, gpus: int = 2):
        self.gpus = [{"uuid": f"GPU-{i}", "dbe": 0, "sbe": 0, "remap": (0, 0, 0, 0), "links": [1] * 18,
                      "pcie": (5, 16, 5, 16), "reasons": 0, "lost": False} for i in range(gpus)]
        self.xids: list[tuple[int, int]] = []

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        if self.gpus[i]["lost"]:
            raise NVMLError("GPU is lost")
        return i

    def nvmlDeviceGetIndex(self, h):
        return h

    def nvmlDeviceGetUUID(self, h):
        return self.gpus[h]["uuid"].encode()

    def nvmlDeviceGetTotalEccErrors(self, h, etype, counter):
        return self.gpus[h]["dbe" if etype == 1 else "sbe"]

    def nvmlDeviceGetRemappedRows(self, h):
        return self.gpus[h]["remap"]

    def nvmlDeviceGetNvLinkState(self, h, link):
        return self.gpus[h]["links"][link]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return self.gpus[h]["pcie"][0]

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return self.gpus[h]["pcie"][1]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return self.gpus[h]["pcie"][2]

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return self.gpus[h]["pcie"][3]

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        return self.gpus[h]["reasons"]

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 41

    def nvmlDeviceGetPowerUsage(self, h):
        return 71000

    def nvmlEventSetCreate(self):
        return "set"

    def nvmlDeviceRegisterEvents(self, h, types, event_set):
        return None

    def nvmlEventSetWait_v2(self, event_set, timeout_ms):
        if not self.xids:
            raise NVMLError("Timeout")
        index, xid = self.xids.pop(0)
        return SimpleNamespace(eventType=0x8, eventData=xid, device=index)


def backend(tmp_path, sim) -> NvmlBackend:
    (tmp_path / "sys/kernel/random").mkdir(parents=True, exist_ok=True)
    (tmp_path / "sys/kernel/random/boot_id").write_text("b00t1d00-0000\n")
    b = NvmlBackend.__new__(NvmlBackend)
    b.nv, b.proc_root, b.sysfs_root, b.dev_root = sim, tmp_path, tmp_path, tmp_path
    return b


def kinds(events):
    return sorted((e["kind"], e["gpu_index"], e["xid"], e["count"]) for e in events)


def test_every_signal_once_until_acknowledged_and_a_new_fault_again(tmp_path):
    sim = Sim()
    b = backend(tmp_path, sim)
    assert b.health_events() == []  # a healthy GPU says nothing
    sim.xids.append((1, 79))
    sim.gpus[0].update(dbe=2, sbe=7, remap=(0, 1, 0, 1), pcie=(4, 8, 5, 16), reasons=0x40)
    sim.gpus[0]["links"][3] = 0
    events = b.health_events()
    assert kinds(events) == [("ecc_dbe", 0, None, 2), ("ecc_sbe", 0, None, 7), ("nvlink_down", 0, None, 1),
                             ("pcie_degraded", 0, None, 1), ("row_remap_failure", 0, None, 1),
                             ("thermal", 0, None, 1), ("xid", 1, 79, 1)]
    assert kinds(b.health_events()) == kinds(events)  # unacknowledged: sent again, same keys
    assert [e["dedup_key"] for e in b.health_events()] == [e["dedup_key"] for e in events]
    b.health_events_ack([e["dedup_key"] for e in events])
    assert b.health_events() == []  # the same state is not a new signal
    sim.gpus[0]["dbe"] = 3  # one more uncorrectable error: a new event for the new one only
    sim.gpus[1]["lost"] = True
    assert kinds(b.health_events()) == [("ecc_dbe", 0, None, 1), ("fallen_off_bus", 1, None, 1)]


def test_a_restarted_agent_re_reports_counters_under_the_same_keys(tmp_path):
    sim = Sim()
    sim.gpus[0]["dbe"] = 2
    first = backend(tmp_path, sim).health_events()
    again = backend(tmp_path, sim).health_events()  # a new process: the control plane de-duplicates by key
    assert [e["dedup_key"] for e in first] == [e["dedup_key"] for e in again] == ["nvml-GPU-0-ecc_dbe-b00t1d00-2"]


def _reset(tmp_path, monkeypatch, payload: dict) -> tuple[dict, list[list[str]]]:
    """Run a `reset_gpu` command through the executor on the NVML backend; nvidia-smi is recorded, not run."""
    import subprocess

    from gpucloud_agent.executor import Executor

    calls: list[list[str]] = []

    def run(cmd, **_kw):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr("gpucloud_agent.backends.nvml.subprocess.run", run)
    sim = Sim(gpus=3)
    del sim.gpus[0]  # GPU-0 went to a VM (vfio-pci): NVML now enumerates GPU-1 at 0 and GPU-2 at 1
    nvml = backend(tmp_path, sim)
    nvml.health_check = lambda index: {"health": "ok", "checked_index": index}  # the check after the reset
    outcome = Executor(nvml).execute({"id": "c1", "kind": "reset_gpu", "payload": payload})
    return outcome, calls


def test_a_reset_goes_to_the_gpu_the_uuid_names_where_nvml_enumerates_it_now(tmp_path, monkeypatch):
    """The inventory recorded GPU-2 at index 2 (three GPUs with the driver then); with GPU-0 passed through, NVML's
    index 2 is no GPU and index 1 is GPU-2: the reset and its health check go to index 1, never to another GPU."""
    outcome, calls = _reset(tmp_path, monkeypatch, {"gpu_index": 2, "gpu_uuid": "GPU-2"})
    assert outcome["succeeded"], outcome
    assert calls == [["nvidia-smi", "--gpu-reset", "-i", "1"]]
    assert outcome["result"] == {"health": "ok", "checked_index": 1}


def test_a_reset_of_a_gpu_the_driver_does_not_see_resets_nothing(tmp_path, monkeypatch):
    outcome, calls = _reset(tmp_path, monkeypatch, {"gpu_index": 0, "gpu_uuid": "GPU-0"})
    assert not outcome["succeeded"] and outcome["result"]["code"] == "gpu_not_visible"
    assert calls == []  # index 0 is GPU-1 now: it was not touched
