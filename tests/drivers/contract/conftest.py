"""Backends for the compute driver contract suite.

- `fake`: the in-memory driver (always).
- `libvirt-test`: libvirt's `test:///` driver on a per-test copy of data/gpu-node.xml (each open re-parses
  the file, so every test gets a private host).
- `qemu-embed`: `qemu:///embed?root=<tmp>` with QEMU under TCG, daemonless, in this process. Skipped only when `qemu-system-x86_64` or libvirt's QEMU driver is not installed; `.ci/run`
  installs both. One process may own an embed root at a time, so the root is per session.
"""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
QEMU = shutil.which("qemu-system-x86_64") or "/usr/bin/qemu-system-x86_64"
QEMU_DRIVER_DIRS = ("/usr/lib/x86_64-linux-gnu/libvirt/connection-driver", "/usr/lib64/libvirt/connection-driver")


def _qemu_driver_installed() -> bool:
    return any(Path(d, "libvirt_driver_qemu.so").exists() for d in QEMU_DRIVER_DIRS)


def _ensure_libvirt_qemu_user() -> str | None:
    """As root, libvirt's QEMU driver resolves its compiled-in user `libvirt-qemu` before reading qemu.conf
   : create it when missing. Returns a skip reason or None."""
    try:
        pwd.getpwnam("libvirt-qemu")
        return None
    except KeyError:
        pass
    if os.geteuid() != 0:
        return "user libvirt-qemu is missing and we are not root to create it"
    subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/var/lib/libvirt",
                    "--shell", "/usr/sbin/nologin", "libvirt-qemu"], check=True)
    return None


_EMBED: dict = {"uri": None, "root": None, "users": 0}


@pytest.fixture(scope="session")
def qemu_embed_uri():
    """A `qemu:///embed` URI rooted in a short temp dir, with `stdio_handler = "file"` (fix 2). A process can open
    only one embed root in its life, so every importer of this fixture shares the one root."""
    if not Path(QEMU).exists():
        pytest.skip("qemu-system-x86_64 is not installed (Debian package qemu-system-x86)")
    if not _qemu_driver_installed():
        pytest.skip("libvirt's QEMU driver is not installed (Debian package libvirt-daemon-driver-qemu)")
    reason = _ensure_libvirt_qemu_user()
    if reason:
        pytest.skip(reason)
    if _EMBED["uri"] is None:
        root = Path(tempfile.mkdtemp(prefix="gc-embed-", dir="/tmp"))  # QEMU's monitor socket path must stay short
        (root / "etc").mkdir()
        # QEMU runs as root so it can read the pytest temp dirs; no sVirt labelling on a test machine.
        (root / "etc" / "qemu.conf").write_text('stdio_handler = "file"\nuser = "root"\ngroup = "root"\n'
                                              'security_driver = "none"\n')
        _EMBED.update(uri=f"qemu:///embed?root={root}", root=root)
    _EMBED["users"] += 1
    yield _EMBED["uri"]
    _EMBED["users"] -= 1
    if _EMBED["users"] == 0:
        from apps.compute.drivers.libvirt.connection import drop_connection

        drop_connection(_EMBED["uri"])
        shutil.rmtree(_EMBED["root"], ignore_errors=True)


@pytest.fixture
def test_node_uri(tmp_path) -> str:
    """A private libvirt test-driver host built from data/gpu-node.xml."""
    path = tmp_path / "gpu-node.xml"
    shutil.copy(DATA / "gpu-node.xml", path)
    uri = f"test://{path}"
    yield uri
    from apps.compute.drivers.libvirt.connection import drop_connection

    drop_connection(uri)
