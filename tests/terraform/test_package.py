"""The provider package without the stack: its docs pages are what the declarations say, the example estate
is valid Terraform against the provider's schema (init from the filesystem mirror, `terraform validate`), and the
plugin does not outlive a killed Terraform."""
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .workspace import ESTATE, TF_DIR, Workspace, require_provider

pytestmark = pytest.mark.slow


def test_docs_pages_match_the_declarations():
    require_provider()
    r = subprocess.run([str(TF_DIR / ".venv/bin/python"), str(TF_DIR / "gendocs.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_example_estate_validates_against_the_provider_schema():
    require_provider()
    ws = Workspace({}, "validate")
    try:
        shutil.copy(ESTATE, ws.dir / "main.tf")
        ws.ok("init", "-backend=false", "-no-color")
        r = ws.ok("validate", "-no-color")
        assert "Success! The configuration is valid." in r.out, r.out
    finally:
        ws.cleanup()


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def test_the_plugin_exits_when_terraform_is_killed():
    """Terraform SIGKILLed alone (not its process group) never calls the plugin's Shutdown: the plugin notices it
    lost its parent and exits within seconds, removing its socket directory, instead of staying behind."""
    require_provider()
    plugin = TF_DIR / ".venv/bin/terraform-provider-gpucloud"
    parent = subprocess.Popen(["sh", "-c", f'"{plugin}" & echo $!; exec sleep 120'], stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        pid = int(parent.stdout.readline())
        handshake = parent.stdout.readline()   # the plugin's go-plugin handshake: it serves
        assert handshake.startswith("1|6|unix|"), handshake
        socket_dir = Path(handshake.split("|")[3]).parent
        assert _running(pid) and socket_dir.is_dir()
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 15
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _running(pid), "the plugin outlived its parent"
        assert not socket_dir.exists()
    finally:
        if parent.poll() is None:
            parent.kill()
