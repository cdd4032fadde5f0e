"""Reading a bare-metal node's disk from outside the node, for the erase read-back (`services.erase`).

`QemuImageDisk(path)` reads the disk image of a VM-backed node (a QEMU VM behind a Redfish emulator such as
sushy-tools, in a lab or a test) with QEMU's own tools: `qemu-img info` for the size, `qemu-io -r -U` (read-only,
sharing the image with a running QEMU) for the bytes, so any format QEMU reads (raw, qcow2) works. Real servers'
disks are read where they are attached (the node agent in the cleaning environment), not here.

Errors: `DriverError` (code `baremetal_disk_unreadable`) when the tools are missing, the image cannot be opened or
a read returns fewer bytes than asked.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from typing import Protocol

from .base import DriverError

# qemu-io's `read -v` dump: "00001000:  a5 a5 ... a5  ................" (offset, up to 16 hex bytes, ASCII)
_DUMP = re.compile(r"^([0-9a-f]{8,}):\s+((?:[0-9a-f]{2} ?)+)\s", re.MULTILINE)


class DiskReader(Protocol):
    """A node's disk: its size in bytes and `read(offset, length) -> bytes` (exactly `length` bytes)."""

    def size(self) -> int: ...

    def read(self, offset: int, length: int) -> bytes: ...


class QemuImageDisk:
    def __init__(self, path: str, fmt: str = "", timeout: float = 30.0):
        self.path, self.fmt, self.timeout = path, fmt, timeout

    def _run(self, args: list[str]) -> str:
        if shutil.which(args[0]) is None:
            raise DriverError(f"{args[0]} is not installed (Debian package qemu-utils)",
                              code="baremetal_disk_unreadable")
        try:
            out = subprocess.run(args, capture_output=True, text=True, timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired as e:
            raise DriverError(f"{args[0]} did not answer in {self.timeout} s", code="baremetal_disk_unreadable") from e
        if out.returncode != 0 or "failed" in out.stderr.lower():
            raise DriverError(f"{args[0]} {self.path}: {(out.stderr or out.stdout).strip()[-500:]}",
                              code="baremetal_disk_unreadable")
        return out.stdout

    def _fmt(self) -> list[str]:
        return ["-f", self.fmt] if self.fmt else []

    def size(self) -> int:
        return int(json.loads(self._run(["qemu-img", "info", "--output=json", "-U", *self._fmt(), self.path]))
                   ["virtual-size"])

    def read(self, offset: int, length: int) -> bytes:
        out = self._run(["qemu-io", "-r", "-U", *self._fmt(), "-c", f"read -v {offset} {length}", self.path])
        data = bytearray()
        for m in _DUMP.finditer(out):
            data += bytes.fromhex(m.group(2).replace(" ", ""))
        if len(data) != length:
            raise DriverError(f"read {length} bytes at {offset} of {self.path}: got {len(data)}",
                              code="baremetal_disk_unreadable")
        return bytes(data)
