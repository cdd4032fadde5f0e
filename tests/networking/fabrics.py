"""Real fabric components for contract tests: the sample fleet in the database, ibsim + OpenSM on a topology
generated from it, and OVN NB/SB + ovn-northd on unix sockets in a temporary directory.

Tests skip (with the reason) only when the Debian binaries are missing; `.ci/run` installs them.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from apps.inventory.demo import SAMPLE
from apps.inventory.fleet.sync import fleet_apply, fleet_plan
from apps.inventory.models import Fabric
from apps.networking import desired
from apps.networking.drivers.ibsim import SimFabric, binary, missing_binaries
from apps.networking.drivers.opensm import render_partitions

OVN_BINARIES = ("ovsdb-server", "ovsdb-tool", "ovn-northd", "ovn-nbctl", "ovn-sbctl", "ovn-trace")
OVN_SCHEMAS = ("/usr/share/ovn/ovn-nb.ovsschema", "/usr/share/ovn/ovn-sb.ovsschema")


def require_ibsim() -> None:
    missing = missing_binaries()
    if missing:
        pytest.skip(f"ibsim/OpenSM not installed (missing {', '.join(missing)}; Debian: ibsim-utils opensm "
                    "infiniband-diags)")


def require_ovn() -> None:
    missing = [b for b in OVN_BINARIES if shutil.which(b) is None and not os.path.exists(f"/usr/sbin/{b}")]
    missing += [s for s in OVN_SCHEMAS if not os.path.exists(s)]
    if missing:
        pytest.skip(f"OVN not installed (missing {', '.join(missing)}; Debian: ovn-central ovn-host)")


def load_sample_fleet() -> Fabric:
    """Import apps/inventory/fleets/sample.yaml; returns its InfiniBand fabric `ib-compute`."""
    plan = fleet_plan(SAMPLE.read_text())
    assert plan.ok, plan.errors
    fleet_apply(plan)
    return Fabric.objects.get(name="ib-compute")


def start_sim(fabric: Fabric) -> SimFabric:
    """ibsim on the fabric's inventory topology with OpenSM running on an empty tenant partitions file."""
    sim = SimFabric(desired.ibsim_topology(fabric)).start()
    try:
        sim.start_opensm(render_partitions([]))
    except Exception:
        sim.cleanup()
        raise
    return sim


def sim_config(sim: SimFabric) -> dict:
    """`NETWORKING_IB_FABRICS` entry for a simulated fabric."""
    return {"driver": "opensm", "partitions_path": str(sim.partitions_path), "pid_file": str(sim.pid_file),
            "env": {"LD_PRELOAD": sim.env["LD_PRELOAD"], "IBSIM_SOCKNAME": sim.sockname},
            "verify_sample": 64, "verify_timeout": 10}


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting for its parent counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


class OvnCluster:
    """OVN NB + SB ovsdb-servers and ovn-northd, daemonised, stopped by pidfile."""

    def __init__(self):
        self.run = Path(tempfile.mkdtemp(prefix="gpc-ovn-"))
        self.env = {**os.environ, "OVS_RUNDIR": str(self.run), "OVS_LOGDIR": str(self.run),
                    "OVS_DBDIR": str(self.run), "OVN_RUNDIR": str(self.run), "OVN_LOGDIR": str(self.run),
                    "OVN_NB_DB": f"unix:{self.run}/nb.sock", "OVN_SB_DB": f"unix:{self.run}/sb.sock"}
        self.nb = self.env["OVN_NB_DB"]

    def _sh(self, *args: str) -> str:
        args = (binary(args[0]), *args[1:])       # ovsdb-server lives in /usr/sbin, maybe not on PATH
        return subprocess.run(list(args), env=self.env, cwd=self.run, check=True, capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL).stdout

    def start(self) -> OvnCluster:
        r = str(self.run)
        self._sh("ovsdb-tool", "create", f"{r}/nb.db", OVN_SCHEMAS[0])
        self._sh("ovsdb-tool", "create", f"{r}/sb.db", OVN_SCHEMAS[1])
        for db, name, table in (("nb", "OVN_Northbound", "NB_Global"), ("sb", "OVN_Southbound", "SB_Global")):
            self._sh("ovsdb-server", f"{r}/{db}.db", f"--remote=punix:{r}/{db}.sock",
                     f"--remote=db:{name},{table},connections", f"--pidfile={r}/{db}.pid",
                     f"--unixctl={r}/{db}.ctl", f"--log-file={r}/{db}.log", "--detach", "--no-chdir")
        self._sh("ovn-northd", f"--ovnnb-db={self.nb}", f"--ovnsb-db={self.env['OVN_SB_DB']}",
                 f"--pidfile={r}/northd.pid", f"--unixctl={r}/northd.ctl", f"--log-file={r}/northd.log",
                 "--detach", "--no-chdir")
        return self

    def nbctl(self, *args: str) -> str:
        return self._sh("ovn-nbctl", *args)

    def sync(self) -> None:
        """Wait until ovn-northd has compiled NB into SB logical flows."""
        self.nbctl("--wait=sb", "sync")

    def trace(self, datapath: str, flow: str) -> str:
        return self._sh("ovn-trace", "--minimal", "--ct", "new", "--ct", "new", datapath, flow)

    def stop(self) -> None:
        for name in ("northd", "sb", "nb"):
            pidfile = self.run / f"{name}.pid"
            try:
                pid = int(pidfile.read_text().strip())
            except (FileNotFoundError, ValueError):
                continue
            try:
                os.kill(pid, 15)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.05)
        shutil.rmtree(self.run, ignore_errors=True)
