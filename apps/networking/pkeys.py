"""InfiniBand partition keys (P_Keys) and port GUIDs: parsing and validation, no database.

P_Key facts (InfiniBand Architecture Specification vol. 1, 10.9; `man opensm` "Partition configuration";
verified with OpenSM 3.3.23, see docs/networking.md and RW-041 in the shared real-world cases):

- a P_Key is 16 bits; bit 15 (0x8000) is the membership bit (1 = full, 0 = limited), the low 15 bits are the
  partition number ("the key"). 0x0123 and 0x8123 name the same partition.
- 0x7fff is the default (management) partition; 0x0000 is invalid (OpenSM silently auto-assigns a key for it).
- tenant keys are therefore 0x0001-0x7ffe; OpenSM masks larger values to 15 bits, so 0xffff would silently
  become a full membership of the default partition: we reject it instead.
- GUIDs in partitions.conf must be written with `0x`; without it OpenSM reads them as decimal.
"""
from __future__ import annotations

import re

MEMBERSHIP_BIT = 0x8000
KEY_MASK = 0x7FFF
DEFAULT_PKEY = 0x7FFF
MIN_TENANT_PKEY = 0x0001
MAX_TENANT_PKEY = 0x7FFE

_GUID_RE = re.compile(r"^(?:0x)?([0-9a-fA-F]{1,16})$")


class PkeyError(ValueError):
    """An invalid P_Key; `code` is the stable API error code."""

    def __init__(self, message: str, code: str = "invalid_pkey"):
        super().__init__(message)
        self.code = code


def parse_pkey(value: int | str) -> int:
    """Parse a requested P_Key (int, or str in hex `0x..` or decimal) to its 15-bit partition number.

    Accepts 0x0001-0x7ffe and the same values with the membership bit set (0x8001 → 0x0001; the membership of
    each member is set per member, never by the key). Raises `PkeyError` for 0x0000/0x8000, 0x7fff/0xffff (default
    partition), values above 0xffff, negatives and unparsable text. Source: RW-041.
    """
    if isinstance(value, bool):
        raise PkeyError("P_Key must be a number.")
    if isinstance(value, str):
        text = value.strip().lower()
        try:
            number = int(text, 16) if text.startswith("0x") else int(text, 10)
        except ValueError:
            raise PkeyError(f"P_Key {value!r} is not a number (write hex as 0x0123).")
    elif isinstance(value, int):
        number = value
    else:
        raise PkeyError("P_Key must be a number.")
    if number < 0 or number > 0xFFFF:
        raise PkeyError(f"P_Key {number:#x} does not fit in 16 bits.")
    key = number & KEY_MASK
    if key == 0:
        raise PkeyError("P_Key 0x0000 is invalid (OpenSM would auto-assign a key).")
    if key == DEFAULT_PKEY:
        raise PkeyError(f"P_Key {number:#06x} is the default partition 0x7fff, reserved for the fabric.",
                        code="pkey_reserved")
    return key


def format_pkey(key: int) -> str:
    """`0x0123` (15-bit key, four hex digits)."""
    return f"{key:#06x}"


def check_pool_bounds(first: int, last: int) -> None:
    """An operator's P_Key pool must lie inside 0x0001-0x7ffe with first <= last; raises `PkeyError`."""
    if not (MIN_TENANT_PKEY <= first <= last <= MAX_TENANT_PKEY):
        raise PkeyError(f"P_Key pool {first:#06x}-{last:#06x} must satisfy 0x0001 <= first <= last <= 0x7ffe.",
                        code="invalid_pkey_pool")


def parse_guid(value: int | str) -> int:
    """A 64-bit GUID from `0x0c42a10300aa0001`, `0c42a10300aa0001`, `0c:42:a1:03:00:aa:00:01` or an int.

    Raises `ValueError` for anything else (empty, more than 16 hex digits, non-hex)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value < 2**64:
            return value
        raise ValueError(f"GUID {value} does not fit in 64 bits")
    text = str(value).strip().replace(":", "")
    match = _GUID_RE.match(text)
    if not match:
        raise ValueError(f"{value!r} is not a 64-bit GUID")
    return int(match.group(1), 16)


def format_guid(value: int | str) -> str:
    """Canonical GUID text as OpenSM and smpquery print it: `0x` + 16 lowercase hex digits."""
    return f"0x{parse_guid(value):016x}"


def same_partition(a: int, b: int) -> bool:
    """True when two 16-bit P_Key values name the same partition (compare the 15-bit keys; RW-044)."""
    return (a & KEY_MASK) == (b & KEY_MASK)


def is_full_member(raw_pkey: int) -> bool:
    """True when a P_Key table entry carries the full-membership bit."""
    return bool(raw_pkey & MEMBERSHIP_BIT)


def pkey_index(table: list[int], key: int) -> int | None:
    """The index of partition `key` (15-bit) in a port's full P_Key table (zeros kept at their positions), or
    None. Workloads must use this index, not 0 (RW-044: a hard-coded index 0 hangs when the key sits elsewhere)."""
    return next((i for i, raw in enumerate(table) if raw and same_partition(raw, key)), None)
