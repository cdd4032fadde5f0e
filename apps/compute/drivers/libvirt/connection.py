"""One long-lived libvirt connection per host URI per process, opened with a timeout.

Why a process-level cache: libvirt's `test:///default` driver keeps its state only while a connection in the
same process is open, and `qemu:///embed` lets only one process own its root; a
production `qemu+tls://` connection is expensive (TLS handshake) and carries keepalives. So a worker opens each
host's URI once, reuses it, and drops it when libvirt reports it dead.

libvirt's default event loop is registered before the first `open()` (needed for keepalives on remote URIs
and by the embedded QEMU driver) and run in a daemon thread.
"""
from __future__ import annotations

import concurrent.futures
import logging
import threading
from urllib.parse import urlsplit

import libvirt

from apps.core.drivers import DriverTransientError

log = logging.getLogger("gpucloud.compute.libvirt")

CONNECT_TIMEOUT_SECONDS = 10.0
KEEPALIVE_INTERVAL_SECONDS = 5
KEEPALIVE_COUNT = 3

_lock = threading.Lock()
_connections: dict[str, libvirt.virConnect] = {}
_event_loop_started = False


def _silence(_ctx, _err) -> None:
    """libvirt prints every error to stderr by default; we raise them as exceptions instead."""


def _ensure_event_loop() -> None:
    global _event_loop_started
    if _event_loop_started:
        return
    libvirt.registerErrorHandler(_silence, None)
    libvirt.virEventRegisterDefaultImpl()

    def _run() -> None:
        while True:
            libvirt.virEventRunDefaultImpl()

    threading.Thread(target=_run, name="libvirt-events", daemon=True).start()
    _event_loop_started = True


def is_remote(uri: str) -> bool:
    """True for URIs that go over a transport (``qemu+tls://host/system``), false for local drivers."""
    parts = urlsplit(uri)
    return "+" in parts.scheme or bool(parts.netloc)


def is_test_driver(uri: str) -> bool:
    """True for libvirt's test driver, in this process (``test:///default``) or hosted by a libvirtd that every
    process shares (``test+unix:///default?socket=/dir/libvirt-sock``): it keeps no files and takes no volume
    uploads."""
    return urlsplit(uri).scheme.split("+", 1)[0] == "test"


def _open(uri: str, timeout: float) -> libvirt.virConnect:
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="libvirt-open")
    future = pool.submit(libvirt.open, uri)
    pool.shutdown(wait=False)
    try:
        conn = future.result(timeout=timeout)
    except concurrent.futures.TimeoutError as exc:
        raise DriverTransientError(f"connecting to {uri} timed out after {timeout}s",
                                   code="host_unreachable") from exc
    except libvirt.libvirtError as exc:
        raise DriverTransientError(f"cannot connect to {uri}: {exc.get_error_message()}",
                                   code="host_unreachable") from exc
    if is_remote(uri):
        try:  # remote transports only; local drivers reject keepalive
            conn.setKeepAlive(KEEPALIVE_INTERVAL_SECONDS, KEEPALIVE_COUNT)
        except libvirt.libvirtError:
            pass
    return conn


def get_connection(uri: str, *, timeout: float = CONNECT_TIMEOUT_SECONDS) -> libvirt.virConnect:
    """The cached connection for `uri`, opened (or reopened when dead) with `timeout` seconds.

    Raises `DriverTransientError` (code `host_unreachable`) when the host does not answer.
    """
    with _lock:
        _ensure_event_loop()
        conn = _connections.get(uri)
    if conn is not None:
        try:
            if conn.isAlive():
                return conn
        except libvirt.libvirtError:
            pass
        log.warning("libvirt_connection_dead", extra={"uri": uri})
    fresh = _open(uri, timeout)  # outside the lock: a slow host must not hold up the others
    with _lock:
        current = _connections.get(uri)
        if current is not None and current is not conn:
            try:
                fresh.close()  # another thread reopened it first
            except libvirt.libvirtError:
                pass
            return current
        _connections[uri] = fresh
        return fresh


def drop_connection(uri: str) -> None:
    """Forget (and close) the cached connection for `uri`; the next call reopens it."""
    with _lock:
        conn = _connections.pop(uri, None)
    if conn is not None:
        try:
            conn.close()
        except libvirt.libvirtError:
            pass


def cached_uris() -> list[str]:
    with _lock:
        return sorted(_connections)
