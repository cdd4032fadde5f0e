"""What identity plugs into other apps, registered once from `IdentityConfig.ready`:

* tenancy's membership-removed hook: a removed member's API tokens bound to the organization or its projects,
  which no remaining membership backs, are revoked with their children (`services.api_tokens_revoke_unbacked`).
"""
from __future__ import annotations

from apps.tenancy.hooks import register_membership_removed

from . import services


def register() -> None:
    register_membership_removed(services.api_tokens_revoke_unbacked)
