"""API token format, generation and verification (ADR 0100).

A token is `gpc_<prefix>_<secret>`: `prefix` 12 lowercase hex characters (48 random bits, unique, stored in clear
and shown in lists and audit events so a leaked token can be identified), `secret` 43 URL-safe characters from
`secrets.token_urlsafe(32)` (256 random bits). The database stores only SHA-256 of the whole token (hex).
A fast hash is enough for a 256-bit random secret (nothing to brute-force, unlike a password); lookups go by
prefix and compare digests in constant time (`hmac.compare_digest`).
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets

TOKEN_RE = re.compile(r"^gpc_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")


def generate() -> tuple[str, str, str]:
    """A new token: (token, prefix, sha256 hex digest of the token)."""
    prefix = secrets.token_hex(6)
    token = f"gpc_{prefix}_{secrets.token_urlsafe(32)}"
    return token, prefix, digest(token)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def parse_prefix(token: str) -> str | None:
    """The prefix of a well-formed token, else None."""
    match = TOKEN_RE.match(token)
    return match.group(1) if match else None


def matches(token: str, stored_digest: str) -> bool:
    return hmac.compare_digest(digest(token), stored_digest)
