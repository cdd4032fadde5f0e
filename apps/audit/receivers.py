"""Refused attempts in the audit log: the API's 403 to a signed-in caller's change (`apps.core.errors.
request_refused`) becomes an `api.request.refused` event: the actor and token, the method and path, the refusal's
code and detail, in the organization the action was about when the refusal knows it (a tenant role's refusal),
else unscoped (a staff role's refusal: the staff audit log shows every event)."""
from __future__ import annotations

from django.db import transaction

from .services import audit_record

ACTION = "api.request.refused"


def record_refusal(sender, *, request, actor, code, detail, organization_id=None, **kwargs) -> None:
    path = request.path
    with transaction.atomic():
        audit_record(actor=actor, action=ACTION, target_type="api.route", target_id=path[:64],
                     organization=organization_id,
                     after={"method": request.method, "path": path, "status": 403, "code": code, "detail": detail})
