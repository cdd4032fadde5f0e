"""Helpers shared by the tenancy services."""
from __future__ import annotations

from apps.audit.services import audit_record


def audit(actor, action: str, target, *, before: dict | None = None, after: dict | None = None, **scope):
    """`audit_record` with the request's API token (its prefix) taken from the actor; an organization target
    scopes the event to itself (so its members can list it)."""
    from ..models import Organization

    if isinstance(target, Organization):
        scope.setdefault("organization", target)
    return audit_record(actor=actor, action=action, target=target, before=before, after=after,
                        token=getattr(actor, "api_token", None), **scope)


def fields_of(obj, names) -> dict:
    return {name: getattr(obj, name) for name in names}
