"""A real libvirt daemon for the storage driver's contract suite.

libvirt's daemonless `qemu:///embed` (what compute's contract suite uses) has no storage driver
(`virStoragePoolDefineXML` answers "not supported by the connection driver"), and `qemu:///system` is shared
machine state. So this session starts a private, unprivileged `libvirtd` (a session daemon): as root it runs
as `nobody`, with HOME and the XDG directories inside one temp dir, so its config, pools, domains, sockets and
QEMU processes belong to this test run only. It also drives QEMU (TCG), so disks can be hot-plugged into a
running guest. Skipped only when libvirtd, qemu-system-x86_64 or qemu-img/qemu-io is not installed (Debian
packages libvirt-daemon, which carries the storage driver, qemu-system-x86 and qemu-utils; `.ci/run` installs
them).
"""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

LIBVIRTD = shutil.which("libvirtd") or "/usr/sbin/libvirtd"
QEMU = shutil.which("qemu-system-x86_64") or "/usr/bin/qemu-system-x86_64"


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    for path in [root, *root.rglob("*")]:
        os.chown(path, uid, gid)


def session_daemon_start() -> tuple[subprocess.Popen, Path, Path]:
    """Start a private libvirtd session daemon (as `nobody` when run as root; HOME and XDG directories in one
    temp dir). Returns (process, root dir, socket path); fails the test when it does not come up in 15 s. Stop it
    with `session_daemon_stop`. Its sockets, unlike a system daemon's, never meet another daemon's `/run/libvirt`.
    """
    root = Path(tempfile.mkdtemp(prefix="gc-lvs-", dir="/tmp"))  # UNIX socket paths must stay short
    for sub in ("home", "run", "cache", "config/libvirt", "pools"):
        (root / sub).mkdir(parents=True)
    (root / "config/libvirt/libvirtd.conf").write_text(f'log_level = 3\nlog_outputs = "3:file:{root}/libvirtd.log"\n')
    (root / "config/libvirt/qemu.conf").write_text('stdio_handler = "file"\n')  # no virtlogd
    prefix: list[str] = []
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        _chown_tree(root, nobody.pw_uid, nobody.pw_gid)
        prefix = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]
    env = {"PATH": "/usr/sbin:/usr/bin:/bin", "HOME": f"{root}/home", "XDG_RUNTIME_DIR": f"{root}/run",
           "XDG_CONFIG_HOME": f"{root}/config", "XDG_CACHE_HOME": f"{root}/cache"}
    proc = subprocess.Popen([*prefix, LIBVIRTD], env=env, cwd=root, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    sock = root / "run/libvirt/libvirt-sock"
    deadline = time.monotonic() + 15
    while not sock.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if not sock.exists():
        proc.kill()
        log = (root / "libvirtd.log").read_text() if (root / "libvirtd.log").exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"libvirtd did not come up: {log[-2000:]}")
    return proc, root, sock


@pytest.fixture(scope="session")
def libvirt_session():
    """(URI, root dir) of a private libvirtd session daemon; the daemon stops when the session ends."""
    if not Path(LIBVIRTD).exists():
        pytest.skip("libvirtd is not installed (Debian package libvirt-daemon)")
    if not Path(QEMU).exists():
        pytest.skip("qemu-system-x86_64 is not installed (Debian package qemu-system-x86)")
    if not (shutil.which("qemu-img") and shutil.which("qemu-io")):
        pytest.skip("qemu-img and qemu-io are not installed (Debian package qemu-utils)")
    proc, root, sock = session_daemon_start()
    uri = f"qemu+unix:///session?socket={sock}"
    yield uri, root
    from apps.compute.drivers.libvirt.connection import drop_connection, get_connection

    try:  # power off whatever a failed test left running: QEMU outlives libvirtd
        for dom in get_connection(uri).listAllDomains(0):
            if dom.isActive():
                dom.destroy()
    finally:
        drop_connection(uri)
        session_daemon_stop(proc, root)


def session_daemon_stop(proc: subprocess.Popen, root: Path) -> None:
    """Stop a daemon of `session_daemon_start` and remove its directory."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    shutil.rmtree(root, ignore_errors=True)
