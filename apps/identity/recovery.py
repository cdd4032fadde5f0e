"""Recovery code format: ten codes of 16 base32 characters (80 random bits), shown as `xxxx-xxxx-xxxx-xxxx`.

Stored as SHA-256 hex of the normalised code (lower case, no dashes or spaces): see `RecoveryCodeDevice`.
"""
from __future__ import annotations

import base64
import hashlib
import secrets

COUNT = 10


def generate() -> list[str]:
    """`COUNT` new codes, formatted for display."""
    codes = []
    for _ in range(COUNT):
        raw = base64.b32encode(secrets.token_bytes(10)).decode().lower()
        codes.append("-".join(raw[i:i + 4] for i in range(0, 16, 4)))
    return codes


def normalise(code: str) -> str:
    return "".join(code.split()).replace("-", "").lower()


def digest(code: str) -> str:
    """SHA-256 hex of the normalised code; "" for anything that is not 16 characters."""
    value = normalise(code)
    return hashlib.sha256(value.encode()).hexdigest() if len(value) == 16 else ""
