"""ibsim (the InfiniBand fabric simulator from ibsim-utils) and OpenSM processes, and topology files.

Used three ways: by `OpenSmDriver` to validate a partitions file with OpenSM's own parser on a throw-away
simulated fabric (OpenSM has no parse-only option), by the contract tests, and by `bench/fabric_reconcile.py`.

Facts (verified with ibsim 0.10, OpenSM 3.3.23): every libibumad tool talks to the
simulator when `LD_PRELOAD` holds libumad2sim.so; `IBSIM_SOCKNAME` must be unique per simulator; OpenSM must be
stopped before ibsim; `-d2` flushes the log so "SUBNET UP" can be polled; the topology file uses the
ibnetdiscover format (`switchguid=`, `caguid=`, `"H-<guid>"`, `[port](<port guid>)`). Measured here: ibsim ignores the
`(<port guid>)` annotation of a CA and numbers port 1 as node GUID + 1, so the node GUID must be port GUID - 1.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
REQUIRED_BINARIES = ("ibsim", "opensm", "smpquery")


def missing_binaries() -> list[str]:
    """Names of the ibsim/OpenSM/infiniband-diags pieces not installed here (empty when all are)."""
    missing = [b for b in REQUIRED_BINARIES if shutil.which(b) is None and not os.path.exists(f"/usr/sbin/{b}")]
    if not os.path.exists(UMAD2SIM):
        missing.append(UMAD2SIM)
    return missing


def binary(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


@dataclass(frozen=True)
class SimSwitch:
    name: str
    guid: int
    ports: int = 64


@dataclass(frozen=True)
class SimHca:
    """One HCA port cabled to `switch`:`switch_port` (an HCA with one port, as mlx5 presents each port)."""

    name: str
    node_guid: int
    port_guid: int
    switch: str
    switch_port: int


@dataclass(frozen=True)
class SimLink:
    a: str
    a_port: int
    b: str
    b_port: int


def render_topology(switches: Sequence[SimSwitch], hcas: Sequence[SimHca], links: Sequence[SimLink] = ()) -> str:
    """ibnetdiscover-format topology. The first switch hosts the SM (ibsim attaches clients to the first node).

    Raises ValueError for duplicate GUIDs, unknown switches, a port used twice or beyond the switch's ports."""
    by_name = {s.name: s for s in switches}
    node_guids = [s.guid for s in switches] + [h.node_guid for h in hcas]
    port_guids = [s.guid for s in switches] + [h.port_guid for h in hcas]
    if len(set(node_guids)) != len(node_guids) or len(set(port_guids)) != len(port_guids):
        raise ValueError("duplicate node or port GUID in topology")
    if any(h.port_guid != h.node_guid + 1 for h in hcas):
        raise ValueError("ibsim numbers a CA's port 1 as node GUID + 1: give node_guid = port_guid - 1")
    wiring: dict[str, dict[int, str]] = {s.name: {} for s in switches}

    def plug(switch: str, port: int, text: str) -> None:
        if switch not in by_name:
            raise ValueError(f"unknown switch {switch!r}")
        if not 1 <= port <= by_name[switch].ports or port in wiring[switch]:
            raise ValueError(f"switch {switch} port {port} is out of range or used twice")
        wiring[switch][port] = text

    def sw_id(name: str) -> str:
        return f'"S-{by_name[name].guid:016x}"'

    for h in hcas:
        plug(h.switch, h.switch_port, f'"H-{h.node_guid:016x}"[1]({h.port_guid:016x})')
    for link in links:
        plug(link.a, link.a_port, f"{sw_id(link.b)}[{link.b_port}]")
        plug(link.b, link.b_port, f"{sw_id(link.a)}[{link.a_port}]")
    out: list[str] = []
    for s in switches:
        out += [f"switchguid=0x{s.guid:016x}", f'Switch\t{s.ports} {sw_id(s.name)}\t\t# "{s.name}"']
        out += [f"[{port}]\t{peer}" for port, peer in sorted(wiring[s.name].items())]
        out.append("")
    for h in hcas:
        out += [f"caguid=0x{h.node_guid:016x}", f'Ca\t1 "H-{h.node_guid:016x}"\t\t# "{h.name}"',
                f"[1]({h.port_guid:016x})\t{sw_id(h.switch)}[{h.switch_port}]", ""]
    return "\n".join(out)


def _wait_for(path: Path, text: str, timeout: float, proc: subprocess.Popen | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if text in path.read_text(errors="replace"):
                return True
        except FileNotFoundError:
            pass
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.02)
    return False


class SimFabric:
    """An ibsim simulator plus (optionally) a long-running OpenSM on it, in `workdir`.

    `env` is what every client (opensm, smpquery) needs: LD_PRELOAD and IBSIM_SOCKNAME."""

    def __init__(self, topology_text: str, *, workdir: str | None = None, max_nodes: int = 4096):
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="gpc-ibsim-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.topology = self.workdir / "topology.net"
        self.topology.write_text(topology_text)
        self.sockname = f"gpc-{uuid.uuid4().hex[:12]}"
        self.env = {**os.environ, "IBSIM_SOCKNAME": self.sockname, "LD_PRELOAD": UMAD2SIM,
                    "OSM_CACHE_DIR": str(self.workdir), "OSM_TMP_DIR": str(self.workdir)}
        self.max_nodes = max_nodes
        self.sim: subprocess.Popen | None = None
        self.opensm: subprocess.Popen | None = None
        self.partitions_path = self.workdir / "partitions.conf"
        self.osm_log = self.workdir / "osm.log"

    def start(self, *, timeout: float = 20.0) -> SimFabric:
        log = open(self.workdir / "ibsim.log", "w")
        sim_env = {k: v for k, v in self.env.items() if k != "LD_PRELOAD"}
        self.sim = subprocess.Popen([binary("ibsim"), "-s", "-n", "-N", str(self.max_nodes), "-S", "1024",
                                     "-P", str(self.max_nodes * 4), str(self.topology)],
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=sim_env, cwd=self.workdir)
        if not _wait_for(self.workdir / "ibsim.log", "simulator ready", timeout, self.sim):
            self.stop()
            raise RuntimeError(f"ibsim did not start: {(self.workdir / 'ibsim.log').read_text()[-2000:]}")
        return self

    def start_opensm(self, partitions_text: str | None = None, *, timeout: float = 30.0) -> int:
        """Start OpenSM (sweep every 5 s) reading `partitions_path`; returns its pid once "SUBNET UP"."""
        if partitions_text is not None:
            self.partitions_path.write_text(partitions_text)
        out = open(self.workdir / "opensm.out", "w")
        self.opensm = subprocess.Popen(
            [binary("opensm"), "-e", "-d2", "-f", str(self.osm_log), "-P", str(self.partitions_path),
             "--dump_files_dir", str(self.workdir), "-s", "5"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env, cwd=self.workdir)
        (self.workdir / "opensm.pid").write_text(str(self.opensm.pid))
        if not _wait_for(self.osm_log, "SUBNET UP", timeout, self.opensm):
            raise RuntimeError(f"OpenSM did not bring the subnet up: {self.osm_log.read_text()[-2000:]}")
        return self.opensm.pid

    @property
    def pid_file(self) -> Path:
        return self.workdir / "opensm.pid"

    def stop(self) -> None:
        """OpenSM first (it ignores SIGTERM once ibsim is gone), then ibsim."""
        for attr in ("opensm", "sim"):
            proc = getattr(self, attr)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
            setattr(self, attr, None)

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> SimFabric:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.cleanup()


VALIDATION_TOPOLOGY = render_topology([SimSwitch("validator-sw", 0x0002C90300000001, 8)],
                                      [SimHca("validator-hca", 0x0002C90300000010, 0x0002C90300000011,
                                              "validator-sw", 1)])
PARSE_FAILURE_MARKERS = ("PARSE ERROR", "PARSE WARN", "Partition configuration in error")


def validate_with_opensm(text: str, *, timeout: float = 30.0) -> tuple[bool, list[str]]:
    """Run OpenSM's own partitions parser on `text` (`opensm --once` on a throw-away ibsim).

    Returns (ok, messages): ok is False when the log shows a PARSE ERROR/WARN or "Partition configuration in
    error" (the case where OpenSM would fall back to `Default=0x7fff : ALL=full`). Raises RuntimeError when the
    simulator or OpenSM could not run (infrastructure, not the file)."""
    with SimFabric(VALIDATION_TOPOLOGY, max_nodes=16) as fab:
        fab.partitions_path.write_text(text)
        proc = subprocess.run(
            [binary("opensm"), "--once", "-e", "-d2", "-f", str(fab.osm_log), "-P", str(fab.partitions_path),
             "--dump_files_dir", str(fab.workdir)],
            env=fab.env, cwd=fab.workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
            stdin=subprocess.DEVNULL)
        log = fab.osm_log.read_text(errors="replace") if fab.osm_log.exists() else ""
        if proc.returncode != 0 or "SUBNET UP" not in log:
            raise RuntimeError(f"OpenSM validator did not run (rc={proc.returncode}): {proc.stdout[-1000:]!r}")
        bad = [line for line in log.splitlines() if any(m in line for m in PARSE_FAILURE_MARKERS)]
        return not bad, bad
