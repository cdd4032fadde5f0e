"""Organization writes. Organizations are created by provider staff, who invite the first owner."""
from __future__ import annotations

import re
import zoneinfo

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.db import unique_conflict
from apps.core.errors import Conflict, ValidationFailed

from .. import authz, quotas
from ..errors import Code, Forbidden
from ..models import Organization, OrgRole, Quota
from ._common import fields_of

EDITABLE = ("name", "legal_name", "billing_email", "currency", "billing_timezone", "default_sla_tier", "plan",
            "require_2fa")
STAFF_ONLY = frozenset({"currency", "default_sla_tier", "plan"})
BILLING_FIELDS = frozenset({"legal_name", "billing_email", "billing_timezone"})
# what writing staff change on any organization, the billing account they run (docs/adr/0104); the rest (its
# sign-in policy) is the customer's, changed by staff only through a membership
PROVIDER_FIELDS = STAFF_ONLY | BILLING_FIELDS | {"name"}
_CURRENCY = re.compile(r"^[A-Z]{3}$")


def _validate(fields: dict) -> None:
    errors: dict[str, list[str]] = {}
    if "currency" in fields and not _CURRENCY.match(fields["currency"] or ""):
        errors["currency"] = ["an ISO 4217 code of three capital letters, e.g. USD"]
    if "billing_timezone" in fields:
        try:
            zoneinfo.ZoneInfo(fields["billing_timezone"])
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            errors["billing_timezone"] = ["an IANA time zone name, e.g. UTC or Europe/Berlin"]
    if "plan" in fields and fields["plan"] not in quotas.PLANS:
        raise ValidationFailed(f"Unknown plan {fields['plan']!r}.", code=Code.UNKNOWN_PLAN,
                               errors={"plan": [f"one of {', '.join(quotas.PLANS)}"]})
    if errors:
        raise ValidationFailed("Invalid organization fields.", errors=errors)


def organization_create(*, actor, slug: str, name: str, owner_email: str, **fields) -> Organization:
    """Create an organization with its plan's default quotas and invite `owner_email` as owner.

    Staff only (operator or billing admin). 409 `slug_taken`; 400 `unknown_plan` / `validation_error`.
    The owner receives a signed invitation by e-mail (see `invitation_create`)."""
    from .invitations import invitation_create

    authz.authorize_staff(actor)
    fields = {k: v for k, v in fields.items() if k in EDITABLE}
    _validate(fields)
    with transaction.atomic():
        if Organization.objects.filter(slug=slug).exists():
            raise Conflict(f"Organization slug {slug!r} is taken.", code=Code.SLUG_TAKEN)
        with unique_conflict(f"Organization slug {slug!r} is taken.", code=Code.SLUG_TAKEN):
            org = Organization.objects.create(slug=slug, name=name, **fields)
        Quota.objects.bulk_create([Quota(organization=org, resource=resource, limit=limit)
                                   for resource, limit in quotas.PLANS[org.plan].items()])
        audit_record(actor=actor, action="organization.create", target=org, after=fields_of(org, ("slug", *EDITABLE)))
        invitation_create(actor=actor, organization=org, email=owner_email, role=OrgRole.OWNER)
    return org


def organization_update(*, actor, organization: Organization, **changes) -> Organization:
    """Change organization fields. Writing staff: the name, plan, currency, SLA tier and billing fields; owner/admin: all but plan, currency, SLA tier; billing role:
    legal name, billing e-mail, billing time zone. 403 `permission_denied` otherwise."""
    changes = {k: v for k, v in changes.items() if k in EDITABLE}
    roles = {OrgRole.OWNER, OrgRole.ADMIN} | ({OrgRole.BILLING} if set(changes) <= BILLING_FIELDS else set())
    staff_roles = authz.STAFF_WRITERS if set(changes) <= PROVIDER_FIELDS else ()
    authz.authorize_org(actor, organization, roles, staff_roles=staff_roles)
    if set(changes) & STAFF_ONLY and actor is not None and getattr(actor, "staff_role", "") not in authz.STAFF_WRITERS:
        raise Forbidden("Plan, currency and SLA tier are set by the provider.", code=Code.PERMISSION_DENIED)
    _validate(changes)
    with transaction.atomic():
        org = Organization.objects.select_for_update().get(pk=organization.pk)
        before = fields_of(org, changes)
        for key, value in changes.items():
            setattr(org, key, value)
        org.save(update_fields=list(changes))
        audit_record(actor=actor, action="organization.update", target=org,
                     before=before, after=fields_of(org, changes))
    return org
