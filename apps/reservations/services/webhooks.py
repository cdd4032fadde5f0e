"""Webhook endpoints of an organization (owners and admins manage them). The secret is generated here
(256 random bits, `secrets.token_hex`) and shown once in the create answer."""
from __future__ import annotations

import secrets
from urllib.parse import urlparse

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.errors import ValidationFailed
from apps.tenancy.authz import authorize_org
from apps.tenancy.models import OrgRole

from ..models import WebhookEndpoint

ADMINS = (OrgRole.OWNER, OrgRole.ADMIN)


def webhook_endpoint_create(*, actor, organization, url: str, events: list[str]) -> WebhookEndpoint:
    authorize_org(actor, organization, ADMINS)
    if urlparse(url).scheme not in ("https", "http"):
        raise ValidationFailed("url must be http(s)", errors={"url": ["http or https"]})
    with transaction.atomic():
        ep = WebhookEndpoint.objects.create(organization=organization, url=url, events=sorted(set(events)),
                                            secret=secrets.token_hex(32))
        audit_record(actor=actor, action="reservations.webhook.create", target=ep, organization=organization,
                     after={"url": url, "events": ep.events})
    return ep


def webhook_endpoint_delete(*, actor, endpoint: WebhookEndpoint) -> None:
    authorize_org(actor, endpoint.organization, ADMINS)
    with transaction.atomic():
        audit_record(actor=actor, action="reservations.webhook.delete", target=endpoint,
                     organization=endpoint.organization, before={"url": endpoint.url})
        endpoint.delete()
