"""A real OpenStack Ironic (standalone, fake-hardware and redfish types) for the bare-metal contract suite.

`scripts/ironic-env.sh` (`make ironic`, which `make test` runs) installs Ironic into its own virtual environment
(var/ironic/venv); `scripts/ironic-standalone.sh` starts it with a private config, SQLite database and port in a
temp dir, and stops it when the session ends. Skipped only when that environment is missing.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "ironic-standalone.sh"
VENV = ROOT / "var" / "ironic" / "venv"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def ironic_endpoint():
    if not (VENV / "bin" / "ironic").exists():
        pytest.skip("Ironic is not installed in var/ironic/venv (run `make ironic`)")
    root = Path(tempfile.mkdtemp(prefix="gc-ironic-"))
    run = subprocess.run(
        [str(SCRIPT), "start", str(root), str(_free_port())], capture_output=True, text=True, timeout=180
    )
    if run.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"Ironic did not start: {run.stderr[-3000:]}")
    yield run.stdout.strip()
    subprocess.run([str(SCRIPT), "stop", str(root)], timeout=30, check=False)
    shutil.rmtree(root, ignore_errors=True)
