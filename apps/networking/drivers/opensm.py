"""OpenSM adapter: render the complete partitions.conf, validate it, install it atomically, SIGHUP, verify.

OpenSM facts this relies on (`man opensm`, verified with OpenSM 3.3.23):
- a missing, empty or unparsable partitions file makes OpenSM fall back to `Default=0x7fff : ALL=full` —
  every port a full member of one partition, tenant isolation gone, with no error to the caller. So the file on
  disk must always be complete and valid: we validate with OpenSM's own parser first, write a temporary file,
  fsync it and rename it over the old one, and keep a copy of the last good file beside it.
- `kill -HUP` makes OpenSM re-read the file; a heavy sweep (e.g. after a link change) re-reads it too.
- OpenSM keeps a key at its P_Key table index: a removed key leaves a 0x0000 hole, so compare sets of non-zero
  entries, by 15-bit key (RW-044), never positions.
"""
from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from apps.core.drivers import DriverError, DriverTransientError

from .base import IbApplyResult, PartitionSpec
from .ibsim import binary, validate_with_opensm

DEFAULT_LINE = "Default=0x7fff, ipoib : ALL=limited, SELF=full ;"
_GUID = re.compile(r"^0x[0-9a-f]{16}$")
_NAME_OK = re.compile(r"[^A-Za-z0-9_.-]")
GUIDS_PER_LINE = 6


def _check(partitions: Sequence[PartitionSpec]) -> None:
    keys: set[int] = set()
    for p in partitions:
        if not 0x0001 <= p.pkey <= 0x7FFE:
            raise DriverError(f"partition {p.name}: P_Key {p.pkey:#06x} outside 0x0001-0x7ffe", code="invalid_pkey")
        if p.pkey in keys:
            raise DriverError(f"P_Key {p.pkey:#06x} twice", code="duplicate_pkey")
        keys.add(p.pkey)
        for m in p.members:
            if not _GUID.match(m.guid) or m.membership not in ("full", "limited"):
                raise DriverError(f"partition {p.name}: bad member {m}", code="invalid_member")


def render_partitions(partitions: Sequence[PartitionSpec]) -> str:
    """The complete partitions.conf: the default partition (every port limited, the SM's port full) and one
    statement per tenant partition, sorted by key, members sorted, every GUID with `0x` and an explicit
    membership. Raises `DriverError` for a key outside 0x0001-0x7ffe, a duplicate key or a malformed GUID."""
    _check(partitions)
    lines = ["# Written by gpucloud. Do not edit: a reconcile replaces this file.", DEFAULT_LINE]
    for p in sorted(partitions, key=lambda x: x.pkey):
        flags = [f"{_NAME_OK.sub('_', p.name)}={p.pkey:#06x}"]
        if p.index0:
            flags.append("indx0")
        if p.ipoib:
            flags.append("ipoib")
            flags += [f"{k}={v}" for k, v in (("mtu", p.mtu_code), ("rate", p.rate_code), ("sl", p.sl))
                      if v is not None]
        members = [f"{m.guid}={m.membership}" for m in sorted(p.members, key=lambda m: m.guid)]
        chunks = [", ".join(members[i:i + GUIDS_PER_LINE]) for i in range(0, len(members), GUIDS_PER_LINE)]
        body = (",\n    ".join(chunks)) if chunks else ""
        lines.append(f"{', '.join(flags)} :" + (f"\n    {body}" if body else "") + " ;")
    return "\n".join(lines) + "\n"


def parse_pkey_table(text: str) -> list[int]:
    """Non-zero entries of `smpquery pkeys` output ("   0: 0x7fff 0x8101 0x0000 ...")."""
    values: list[int] = []
    for line in text.splitlines():
        head, sep, rest = line.partition(":")
        if not sep or not head.strip().isdigit():
            continue
        values += [int(tok, 16) for tok in rest.split() if tok.startswith("0x") and int(tok, 16) != 0]
    return values


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


#: What a reconcile found on disk, worst first: ``missing`` (no file), ``unreadable`` (permissions, not a regular
#: file, not UTF-8), ``invalid`` (OpenSM's parser rejects it), ``modified`` (valid but not what we last wrote).
#: Each one is drift: OpenSM may already run every port as a full member of the default partition.
DRIFT_REASONS = ("missing", "unreadable", "invalid", "modified")


def _read_disk(path: Path) -> tuple[str | None, str]:
    """(text, problem) of the file OpenSM reads; problem is '' | ``missing`` | ``unreadable``."""
    try:
        return path.read_text(), ""
    except FileNotFoundError:
        return None, "missing"
    except (OSError, UnicodeDecodeError):
        return None, "unreadable"


class OpenSmDriver:
    """Manage one OpenSM's partitions file.

    `partitions_path`: the file OpenSM reads (`-P`); `pid_file`: OpenSM's pid (for SIGHUP); `env`: extra
    environment for `smpquery` (LD_PRELOAD/IBSIM_SOCKNAME under ibsim); `validator`: callable(text) → (ok, msgs),
    default OpenSM's own parser on a throw-away ibsim (`validate_with_opensm`)."""

    def __init__(self, *, partitions_path: str, pid_file: str | None = None, env: Mapping[str, str] | None = None,
                 validator: Callable[[str], tuple[bool, list[str]]] | None = validate_with_opensm,
                 smpquery_timeout: float = 10.0):
        self.path = Path(partitions_path)
        self.last_good_path = self.path.with_name(self.path.name + ".last-good")
        self.pid_file = Path(pid_file) if pid_file else None
        self.env = {**os.environ, **(env or {})}
        self.validator = validator
        self.smpquery_timeout = smpquery_timeout

    def _validate(self, text: str) -> tuple[bool, list[str]]:
        if self.validator is None:
            return True, []
        try:
            return self.validator(text)
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            raise DriverTransientError(f"partitions validator could not run: {exc}")

    def _hup(self) -> None:
        if self.pid_file is None:
            return
        try:
            pid = int(self.pid_file.read_text().strip())
            os.kill(pid, signal.SIGHUP)
        except (FileNotFoundError, ValueError, ProcessLookupError) as exc:
            raise DriverTransientError(f"cannot signal OpenSM ({self.pid_file}): {exc}")

    def apply(self, partitions: Sequence[PartitionSpec], *, expect_file: bool = False) -> IbApplyResult:
        """Install the partitions (no write when the file already holds them and matches the last good copy).

        Drift (`IbApplyResult.drift`, with `drift_reason` one of `DRIFT_REASONS`): the file is missing,
        unreadable or rejected by OpenSM's parser while a last good copy exists (or `expect_file`: the caller
        applied a file before), or it differs from the last good copy. A missing, unreadable or invalid file is
        replaced by the last good copy at once (then SIGHUP), before the new rendering is validated, so OpenSM's
        full-membership fallback lasts no longer than one write. If the rendered file fails validation, the last
        good file is (re)installed and `DriverError` (code `partitions_invalid`) raised: OpenSM is never left
        with an invalid file by us."""
        text = render_partitions(partitions)
        digest = hashlib.sha256(text.encode()).hexdigest()
        current, problem = _read_disk(self.path)
        last_good = _read(self.last_good_path)
        result = IbApplyResult(digest=digest)
        if not problem and current is not None and current != last_good and current != text:
            ok, _ = self._validate(current)
            problem = "" if ok else "invalid"
        if problem and (last_good is not None or expect_file):
            result.drift, result.drift_reason = True, problem
        elif current is not None and last_good is not None and current != last_good:
            result.drift, result.drift_reason = True, "modified"
        if result.drift and problem and last_good is not None:
            _atomic_write(self.path, last_good)      # close the ALL=full window first
            self._hup()
            current = last_good
            result.writes += 1
            result.restored = result.changed = True
        if current == text and last_good == text:
            return result
        if current != text:
            ok, messages = self._validate(text)
            if not ok:
                if last_good is not None and current != last_good:
                    _atomic_write(self.path, last_good)
                    self._hup()
                    result.restored = True
                raise DriverError("rendered partitions.conf rejected by OpenSM's parser: " + "; ".join(messages[:3]),
                                  code="partitions_invalid")
            _atomic_write(self.path, text)
            result.writes += 1
            result.restored = result.restored or result.drift
            self._hup()
        if last_good != text:
            _atomic_write(self.last_good_path, text)
        result.changed = True
        return result

    def check_file(self) -> tuple[bool, list[str]]:
        """Validate the file on disk as it is (for alerts); (False, ["missing"]) when it does not exist."""
        current, problem = _read_disk(self.path)
        if current is None:
            return False, [problem]
        return self._validate(current)

    def read_pkeys(self, guid: str) -> list[int]:
        """Non-zero P_Key table entries (16-bit, membership bit included) of the port with `guid`, via
        `smpquery -G <guid> pkeys` (needs a running SM for the GUID → LID lookup)."""
        try:
            proc = subprocess.run([binary("smpquery"), "-G", "pkeys", guid], env=self.env, capture_output=True,
                                  text=True, timeout=self.smpquery_timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise DriverTransientError(f"smpquery timed out for {guid}")
        if proc.returncode != 0:
            raise DriverTransientError(f"smpquery failed for {guid}: {proc.stderr.strip()[-300:]}")
        return parse_pkey_table(proc.stdout)

    def wait_applied(self, expected: Mapping[str, set[int]], *, timeout: float = 10.0) -> dict[str, list[int]]:
        """Poll until every GUID's non-zero table equals `expected[guid]` (16-bit values); returns the ports
        that still differ after `timeout` (empty dict = applied)."""
        deadline = time.monotonic() + timeout
        pending = dict(expected)
        wrong: dict[str, list[int]] = {}
        while True:
            wrong = {}
            for guid, want in pending.items():
                got = self.read_pkeys(guid)
                if set(got) != set(want):
                    wrong[guid] = got
            pending = {g: expected[g] for g in wrong}
            if not wrong or time.monotonic() >= deadline:
                return wrong
            time.sleep(0.05)
