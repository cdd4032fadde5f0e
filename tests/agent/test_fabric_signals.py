"""NVSwitch SXids (kernel log), GPU fabric registration and Fabric Manager state, InfiniBand port counters (sysfs):
the parsers against the driver's line formats, the sysfs reader against a fake tree, and the NVML backend's
collection against the NVML simulator of test_nvml_signals (no GPU, NVSwitch or HCA here)."""
from __future__ import annotations

import ctypes
import os

import pytest
from gpucloud_agent import sysfs
from gpucloud_agent.ib_watch import IbPortWatch
from gpucloud_agent.kernel_log import KmsgReader, sxid_parse

from .test_nvml_signals import Sim, backend

FATAL = ("nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 24007, Fatal, Link 32 sourcetrack TCEN0 crumbstore ECC DBE "
         "Error (First)")
NONFATAL = "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 11 egress non-posted PRIV error (First)"


def kmsg(seq: int, text: str) -> str:
    """One /dev/kmsg record: prio,seq,usec,flags;text plus a key=value continuation line."""
    return f"3,{seq},{5033430339 + seq},-;{text}\n SUBSYSTEM=pci\n"


def test_sxid_lines_parse_with_the_drivers_severity_and_the_continuations_are_not_events():
    assert sxid_parse(FATAL) == {"nvswitch_index": 2, "pci_address": "0000:07:00.0", "sxid": 24007, "fatal": True,
                                 "link": 32, "text": "Link 32 sourcetrack TCEN0 crumbstore ECC DBE Error (First)"}
    assert sxid_parse("[ 5033.430339] " + NONFATAL)["fatal"] is False  # as dmesg prints it
    assert sxid_parse(NONFATAL)["link"] == 11 and sxid_parse(NONFATAL)["sxid"] == 12028
    for other in ("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Severity 0 Engine instance 11 Sub-engine "
                  "instance 00",
                  "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Data {0x00000000, 0x00000001, 0x00000000}",
                  "NVRM: Xid (PCI:0000:1b:00): 79, pid=1234, GPU has fallen off the bus.", ""):
        assert sxid_parse(other) is None
    assert sxid_parse("nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, LTSSM Fault Up")["link"] is None


def test_kmsg_reader_reads_new_records_only_and_keeps_a_partial_one(tmp_path):
    log = tmp_path / "kmsg"
    log.write_text(kmsg(7, "usb 1-1: new device") + kmsg(8, NONFATAL) + "3,9,5033,-;nvidia-nvs")
    reader = KmsgReader(log)
    assert reader.read() == [(7, "usb 1-1: new device"), (8, NONFATAL)]
    assert reader.read() == []
    with log.open("a") as f:
        f.write("witch2: x\n" + kmsg(10, FATAL))
    assert reader.read() == [(9, "nvidia-nvswitch2: x"), (10, FATAL)]
    reader.close()
    missing = KmsgReader(tmp_path / "nope")
    assert missing.read() == [] and "nope" in missing.error


def ib_port(root, dev, n=1, *, state="4: ACTIVE", phys="5: LinkUp", rate="400 Gb/sec (4X NDR)", **counters):
    port = root / f"class/infiniband/{dev}/ports/{n}"
    (port / "counters").mkdir(parents=True, exist_ok=True)
    for name, text in (("link_layer", "InfiniBand"), ("state", state), ("phys_state", phys), ("rate", rate)):
        (port / name).write_text(text + "\n")
    for name, value in counters.items():
        (port / "counters" / name).write_text(f"{value}\n")
    return port


def test_sysfs_reads_ib_port_state_rate_and_error_counters(tmp_path):
    ib_port(tmp_path, "mlx5_0", symbol_error=3, link_downed=1, port_rcv_errors=0, link_error_recovery=2)
    ib_port(tmp_path, "mlx5_1", state="1: DOWN", phys="3: Disabled", rate="10 Gb/sec (4X SDR)")
    eth = tmp_path / "class/infiniband/mlx5_2/ports/1"
    eth.mkdir(parents=True)
    (eth / "link_layer").write_text("Ethernet\n")
    assert sysfs.ib_port_health(tmp_path) == [
        {"device": "mlx5_0", "port_number": 1, "state": "ACTIVE", "phys_state": "LinkUp", "rate_gbps": 400,
         "link_downed": 1, "counters": {"symbol_error": 3, "link_error_recovery": 2, "port_rcv_errors": 0}},
        {"device": "mlx5_1", "port_number": 1, "state": "DOWN", "phys_state": "Disabled", "rate_gbps": 10,
         "link_downed": None, "counters": {}}]


def signals(watch, root):
    return sorted((s["kind"], s["hca_device"], s["count"]) for s in watch.poll(sysfs.ib_port_health(root)))


def test_ib_watch_reports_deltas_flaps_down_ports_and_slow_rails(tmp_path):
    ib_port(tmp_path, "mlx5_0", symbol_error=40, link_downed=2, port_rcv_errors=1)
    ib_port(tmp_path, "mlx5_3", symbol_error=0, link_downed=0)
    watch = IbPortWatch()
    assert signals(watch, tmp_path) == []  # the first poll is the baseline: counts since the driver loaded
    ib_port(tmp_path, "mlx5_0", symbol_error=45, link_downed=4, port_rcv_errors=3)
    assert signals(watch, tmp_path) == [("ib_link_flap", "mlx5_0", 2), ("ib_port_errors", "mlx5_0", 7)]
    assert signals(watch, tmp_path) == []  # no change, no signal
    ib_port(tmp_path, "mlx5_3", state="1: DOWN", phys="2: Polling", link_downed=1)
    assert signals(watch, tmp_path) == [("ib_link_flap", "mlx5_3", 1), ("ib_port_down", "mlx5_3", 1)]
    assert signals(watch, tmp_path) == []  # still down: reported once
    ib_port(tmp_path, "mlx5_3", rate="200 Gb/sec (2X NDR)", link_downed=1)  # back, at half the lanes
    assert signals(watch, tmp_path) == [("ib_rate_degraded", "mlx5_3", 1)]
    assert signals(watch, tmp_path) == []
    ib_port(tmp_path, "mlx5_0", symbol_error=2, link_downed=4, port_rcv_errors=3)  # counters reset
    assert signals(watch, tmp_path) == [("ib_port_errors", "mlx5_0", 2)]


class FabricSim(Sim):
    """Sim plus NVML's GPU fabric info (nvidia-ml-py's struct and call: the caller passes a pointer)."""

    c_nvmlGpuFabricInfo_t = type("c_nvmlGpuFabricInfo_t", (ctypes.Structure,), {"_fields_": [
        ("clusterUuid", ctypes.c_uint8 * 16), ("status", ctypes.c_uint), ("cliqueId", ctypes.c_uint32),
        ("state", ctypes.c_uint)]})

    def __init__(self, gpus: int = 2):
        super().__init__(gpus)
        self.fabric = [(3, 0)] * gpus  # (state, status): COMPLETED, NVML_SUCCESS

    def nvmlDeviceGetGpuFabricInfo(self, h, ref):
        ref._obj.state, ref._obj.status = self.fabric[h]
        return 0


def events(b):
    return sorted((e["kind"], e["gpu_index"], e["xid"], e["hca_device"], e["nvswitch"], e["nvswitch_port"])
                  for e in b.health_events())


@pytest.fixture
def systemctl(tmp_path, monkeypatch):
    """A `systemctl is-active` that answers what `state` holds."""
    (tmp_path / "bin").mkdir()
    state = tmp_path / "fm-state"
    state.write_text("active\n")
    script = tmp_path / "bin/systemctl"
    script.write_text(f"#!/bin/sh\n[ \"$2\" = nvidia-fabricmanager ] || exit 4\ncat {state}\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return state


def test_nvml_backend_reports_sxids_fabric_state_and_fabric_manager(tmp_path, systemctl, monkeypatch):
    sim = FabricSim()
    b = backend(tmp_path, sim)
    (tmp_path / "kmsg").write_text(kmsg(1, NONFATAL) + kmsg(2, NONFATAL.replace("12028, Non", "12028, Severity 0")))
    assert events(b) == [("nvswitch_nonfatal", None, 12028, "", "0000:05:00.0", 11)]
    assert b.host_read["fabric_manager"] == "active" and b.host_read["sxid"] == {"sxid_lines": 1, "error": ""}
    b.health_events_ack([e["dedup_key"] for e in b.health_events()])
    with (tmp_path / "kmsg").open("a") as f:
        f.write(kmsg(3, FATAL))
    sim.fabric[1] = (3, 999)  # registration done, with an error: at once
    sim.fabric[0] = (2, 0)  # still in progress: within the grace time, nothing yet
    systemctl.write_text("failed\n")
    assert events(b) == [("fabric_incomplete", 1, None, "", "", None),
                         ("fabric_manager_down", None, None, "", "", None),
                         ("nvswitch_fatal", None, 24007, "", "0000:07:00.0", 32)]
    b.health_events_ack([e["dedup_key"] for e in b.health_events()])
    assert events(b) == []  # the same states are not new signals
    monkeypatch.setattr(type(b), "FABRIC_GRACE_S", 0)
    assert events(b) == [("fabric_incomplete", 0, None, "", "", None)]
    restarted = backend(tmp_path, FabricSim())  # a new process re-reads the kernel log: the same keys
    assert [e["dedup_key"] for e in restarted.health_events() if e["kind"].startswith("nvswitch")] == [
        "nvml-b00t1d00-sxid-1", "nvml-b00t1d00-sxid-3"]


def test_no_fabric_manager_check_without_nvswitches(tmp_path, systemctl):
    sim = FabricSim()
    sim.fabric = [(0, 0), (0, 0)]  # NOT_SUPPORTED: no NVSwitch fabric (PCIe or NVL-bridge GPUs)
    systemctl.write_text("inactive\n")
    b = backend(tmp_path, sim)
    assert events(b) == [] and b.host_read["fabric_manager"] is None


def test_nvml_backend_reports_ib_ports_from_sysfs(tmp_path):
    ib_port(tmp_path, "mlx5_0", symbol_error=0, link_downed=0)
    b = backend(tmp_path, Sim())
    assert events(b) == [] and b.host_read["ib_ports"][0]["device"] == "mlx5_0"
    ib_port(tmp_path, "mlx5_0", symbol_error=150, link_downed=3)
    got = sorted((e["kind"], e["hca_device"], e["hca_port_number"], e["count"]) for e in b.health_events())
    assert got == [("ib_link_flap", "mlx5_0", 1, 3), ("ib_port_errors", "mlx5_0", 1, 150)]
