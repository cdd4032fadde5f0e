"""`audit_record`: the one writer of audit events. Call it inside the service's transaction.

Every app calls it directly (no per-app wrapper): who, with which API token, from which address and under which
request id are taken from the actor and the request context, so every event carries them the same way.
"""
from __future__ import annotations

import json
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

from apps.core.request_context import get_request_id, get_source_ip, get_token_prefix

from .models import AuditEvent

ORGANIZATION_LABEL = "tenancy.organization"


def audit_record(*, actor, action: str, target: models.Model | None = None, target_type: str = "",
                 target_id: str = "", organization=None, project=None, before: dict | None = None,
                 after: dict | None = None, token=None) -> AuditEvent:
    """Append one audit event and return it.

    - `actor`: a User, or None for the system (a task, a reconciler, an unauthenticated agent).
    - `action`: `<app>.<object>.<verb>`, e.g. `networking.vpc.create`.
    - `target`: a model instance (type `app_label.model_name` and id are taken from it), or give
      `target_type`/`target_id`. An organization target scopes the event to itself.
    - `organization`/`project`: instances or ids; default from the target's `project`/`organization`, and the
      organization from the project.
    - `token`: the API token used; by default the actor's (`actor.api_token`, set by bearer authentication), else
      the token bound to the request context for the same user. Only its prefix is stored, never the secret.
    - `before`/`after`: JSON-able dicts (dates, UUIDs and decimals are converted).
    """
    if target is not None:
        target_type = target_type or f"{target._meta.app_label}.{target._meta.model_name}"
        target_id = target_id or str(target.pk)
        project = project if project is not None else getattr(target, "project", None)
        if organization is None:
            organization = target if target._meta.label_lower == ORGANIZATION_LABEL else getattr(
                target, "organization", None)
    if organization is None and project is not None:
        organization = getattr(project, "organization", None)
    actor_id = getattr(actor, "pk", None)
    return AuditEvent.objects.create(
        actor=actor if actor_id else None,
        actor_email=getattr(actor, "email", "") or "",
        actor_is_staff=bool(getattr(actor, "staff_role", "")),
        token_prefix=_token_prefix(actor, token),
        organization_id=getattr(organization, "pk", organization),
        project_id=getattr(project, "pk", project),
        action=action, target_type=target_type, target_id=str(target_id),
        before=_jsonable(before), after=_jsonable(after), request_id=get_request_id(),
        source_ip=get_source_ip() or None,
    )


def _token_prefix(actor, token) -> str:
    if token is None:
        token = getattr(actor, "api_token", None)
    if token is not None:
        return getattr(token, "prefix", "") or ""
    actor_id = getattr(actor, "pk", None)
    return get_token_prefix(actor_id) if actor_id is not None else ""


def _jsonable(value: Any):
    if value is None:
        return None
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))
