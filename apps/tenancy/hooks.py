"""Hooks other apps register (from their `integrations.py`) to act on tenancy changes in the same transaction.

- `register_membership_removed(fn)`: `fn(*, actor, user, organization)` runs after a membership of `user` in
  `organization` (or one of its projects) was deleted, inside that deletion's transaction; identity revokes the
  user's API tokens that no remaining membership backs (docs/tenancy.md, "Tokens and service accounts").
"""
from __future__ import annotations

from collections.abc import Callable

_MEMBERSHIP_REMOVED: list[Callable] = []


def register_membership_removed(fn: Callable) -> None:
    if fn not in _MEMBERSHIP_REMOVED:
        _MEMBERSHIP_REMOVED.append(fn)


def membership_removed(*, actor, user, organization) -> None:
    for fn in _MEMBERSHIP_REMOVED:
        fn(actor=actor, user=user, organization=organization)
