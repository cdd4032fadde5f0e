"""NVSwitch SXid errors from the kernel log (`/dev/kmsg`), as the `nvidia-nvswitch` driver prints them.

Line format (NVIDIA NVSwitch driver; Fabric Manager User Guide, "NVSwitch errors"; NVIDIA's SXid catalogue):
``nvidia-nvswitch<N>: SXid (PCI:<domain:bus:dev.fn>): <SXid>, <Fatal|Non-fatal>, Link <nn> <description>``,
followed by continuation lines for the same SXid that carry no severity word
(``..., Severity 1 Engine instance 08 Sub-engine instance 00``, ``..., Data {0x00000000, ...}``), which are not
events. The driver itself marks each error fatal or non-fatal: a fatal SXid means the NVSwitch (or its port) can
no longer carry traffic and every CUDA job whose NVLink traffic crossed it fails until the switch and the GPUs are
reset; a non-fatal one is reported and traffic goes on.

`/dev/kmsg` (Linux Documentation/ABI/testing/dev-kmsg): one record per read, ``<prio>,<seq>,<usec>,<flags>;<text>``
plus continuation lines starting with a space; a non-blocking read at the end answers EAGAIN, and a record the ring
buffer overwrote before it was read answers EPIPE (the next read goes on). Each open descriptor reads from the
oldest record still kept, so a restarted agent sees the same records again under the same sequence numbers.
"""
from __future__ import annotations

import errno
import os
import re
from pathlib import Path

SXID = re.compile(
    r"nvidia-nvswitch(?P<index>\d+): SXid \(PCI:(?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\): "
    r"(?P<sxid>\d+), (?P<severity>Fatal|Non-fatal), (?P<text>.*)$")
LINK = re.compile(r"\bLink (\d+)\b")


def sxid_parse(line: str) -> dict | None:
    """One kernel log line -> {"nvswitch_index", "pci_address", "sxid", "fatal", "link", "text"}, or None for any
    other line (a continuation line of an SXid included). `link` is the NVSwitch port the driver names (None when
    the error is not about one port); `pci_address` is lower case, as sysfs spells it."""
    m = SXID.search(line.rstrip("\n"))
    if m is None:
        return None
    link = LINK.search(m["text"])
    return {"nvswitch_index": int(m["index"]), "pci_address": m["pci"].lower(), "sxid": int(m["sxid"]),
            "fatal": m["severity"] == "Fatal", "link": int(link.group(1)) if link else None,
            "text": m["text"].strip()}


def sxid_signal(sxid: dict) -> dict:
    """A parsed SXid (`sxid_parse`) -> the health signal's fields: kind ``nvswitch_fatal`` / ``nvswitch_nonfatal``
    (the driver's own severity), the SXid number in `xid`, the switch's PCI address in `nvswitch`, the port in
    `nvswitch_port`, the driver's text in `message`."""
    return {"kind": "nvswitch_fatal" if sxid["fatal"] else "nvswitch_nonfatal", "xid": sxid["sxid"],
            "nvswitch": sxid["pci_address"], "nvswitch_port": sxid["link"],
            "message": f"nvidia-nvswitch{sxid['nvswitch_index']}: SXid {sxid['sxid']}: {sxid['text']}"}


class KmsgReader:
    """Read new `/dev/kmsg` records since the last call: [(seq, text)]. The descriptor stays open between calls (it
    keeps its own read position); a regular file in the same format (tests) reads to its end the same way.
    `error` holds why the log could not be opened (e.g. no CAP_SYSLOG), else ""."""

    def __init__(self, path: Path | str = "/dev/kmsg"):
        self.path, self.fd, self.error, self._rest = Path(path), None, "", b""

    def _open(self) -> bool:
        if self.fd is None:
            try:
                self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            except OSError as exc:
                self.error = f"{self.path}: {exc.strerror}"
                return False
            self.error = ""
        return True

    def read(self) -> list[tuple[int, str]]:
        if not self._open():
            return []
        chunks = []
        while True:
            try:
                chunk = os.read(self.fd, 8192)
            except BlockingIOError:  # EAGAIN: no more records now
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # overwritten before it was read: go on with the next
                    continue
                raise
            if not chunk:  # end of a regular file
                break
            chunks.append(chunk)
        data = self._rest + b"".join(chunks)
        data, _, self._rest = data.rpartition(b"\n") if not data.endswith(b"\n") else (data, b"", b"")
        out = []
        for raw in data.decode(errors="replace").splitlines():
            if not raw or raw.startswith(" "):  # a record's key=value continuation
                continue
            head, sep, text = raw.partition(";")
            fields = head.split(",")
            if sep and len(fields) >= 2 and fields[1].isdigit():
                out.append((int(fields[1]), text))
        return out

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
