"""Webhook endpoints of an organization (owners and admins manage them). The secret is generated here
(256 random bits, `secrets.token_hex`) and shown once in the create answer. A URL the control plane must not call
(loopback, link-local, private, multicast, reserved, a port not allowed; `apps.core.outbound`) is 400
`webhook_destination_refused`."""
from __future__ import annotations

import secrets

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.outbound import destination_check
from apps.tenancy.authz import authorize_org
from apps.tenancy.models import OrgRole

from ..models import WebhookEndpoint

ADMINS = (OrgRole.OWNER, OrgRole.ADMIN)


def webhook_endpoint_create(*, actor, organization, url: str, events: list[str]) -> WebhookEndpoint:
    authorize_org(actor, organization, ADMINS)
    destination_check(url)  # 400 webhook_destination_refused: no loopback, link-local, private ... (SSRF)
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
