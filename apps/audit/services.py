"""`audit_record`: the one writer of audit events. Call it inside the service's transaction."""
from __future__ import annotations

from typing import Any

from django.db import models

from apps.core.request_context import get_request_id, get_source_ip

from .models import AuditEvent


def audit_record(*, actor, action: str, target: models.Model | None = None, target_type: str = "",
                 target_id: str = "", organization=None, project=None, before: dict | None = None,
                 after: dict | None = None, token=None) -> AuditEvent:
    """Append one audit event.

    `actor` is a User or None (system). `target` a model instance (type and id are taken from it) or give
    `target_type`/`target_id`. `organization`/`project` default from the target's `project`/`organization`.
    """
    if target is not None:
        target_type = target_type or f"{target._meta.app_label}.{target._meta.model_name}"
        target_id = target_id or str(target.pk)
        project = project if project is not None else getattr(target, "project", None)
        organization = organization if organization is not None else getattr(target, "organization", None)
    if organization is None and project is not None:
        organization = getattr(project, "organization", None)
    ip = get_source_ip() or None
    return AuditEvent.objects.create(
        actor=actor if getattr(actor, "pk", None) else None,
        actor_email=getattr(actor, "email", "") or "",
        actor_is_staff=bool(getattr(actor, "staff_role", "")),
        token_prefix=getattr(token, "prefix", "") or "",
        organization_id=getattr(organization, "pk", organization),
        project_id=getattr(project, "pk", project),
        action=action, target_type=target_type, target_id=str(target_id),
        before=_jsonable(before), after=_jsonable(after), request_id=get_request_id(), source_ip=ip,
    )


def _jsonable(value: Any):
    if value is None:
        return None
    import json

    from django.core.serializers.json import DjangoJSONEncoder

    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))
