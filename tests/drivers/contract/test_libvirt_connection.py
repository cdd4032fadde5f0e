"""The per-URI connection cache: one connection per URI, reopened when dead, and a host that accepts TCP but
never answers is a transient error within the connect timeout."""
from __future__ import annotations

import socket
import time

import pytest

from apps.compute.drivers.libvirt import LibvirtDriver
from apps.compute.drivers.libvirt.connection import drop_connection, get_connection, is_remote
from apps.core.drivers import DriverTransientError


def test_one_connection_per_uri_reopened_when_dead(test_node_uri):
    first = get_connection(test_node_uri)
    assert get_connection(test_node_uri) is first
    first.close()
    second = get_connection(test_node_uri)
    assert second is not first and second.isAlive() == 1
    drop_connection(test_node_uri)


def test_silent_host_times_out_as_transient():
    with socket.socket() as server:  # listens, never answers libvirt's handshake
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        driver = LibvirtDriver(f"qemu+tcp://127.0.0.1:{port}/system", timeout=1.0)
        started = time.monotonic()
        with pytest.raises(DriverTransientError) as exc:
            driver.domain_list()
        assert time.monotonic() - started < 5
    assert exc.value.code == "host_unreachable" and "timed out" in str(exc.value)


@pytest.mark.parametrize(("uri", "remote"), [
    ("qemu+tls://gpu-1.example/system", True), ("qemu+ssh://root@h/system", True), ("qemu://h/system", True),
    ("qemu:///system", False), ("test:///default", False), ("qemu:///embed?root=/x", False),
])
def test_is_remote(uri, remote):
    assert is_remote(uri) is remote


def test_test_driver_behind_a_daemon_keeps_seeds_as_files(tmp_path):
    """`test+unix://` (libvirt's test driver in a libvirtd every process shares) goes over a socket, but the test
    driver takes no volume uploads: its seeds stay in `seed_dir`, like `test:///default`'s."""
    from apps.compute.drivers.libvirt.connection import is_test_driver

    shared = "test+unix:///default?socket=/tmp/x/libvirt-sock"
    assert is_remote(shared) and is_test_driver(shared) and is_test_driver("test:///default")
    assert not is_test_driver("qemu+tls://h/system")
    assert LibvirtDriver(shared, seed_dir=str(tmp_path)).local_files
    assert LibvirtDriver("test:///default", seed_dir=str(tmp_path)).local_files
    assert not LibvirtDriver("qemu+tls://h/system", seed_dir=str(tmp_path)).local_files
