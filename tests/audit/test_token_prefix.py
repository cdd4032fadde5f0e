"""Every app's audit events carry the API token the write was made with.

Found when the product was probed as a tenant: compute recorded the token's prefix, while networking, billing,
inventory and reservations recorded none, because each app wrapped `audit_record` its own way. Now there is
one writer that reads the token from the actor and the request context; each case below makes one real
token-authenticated write in one app and asserts the event shows that token's prefix.
"""
from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.identity import tokens
from apps.identity.models import StaffRole
from apps.tenancy.models import OrgRole
from tests.compute.conftest import ED25519
from tests.inventory.helpers import make_host
from tests.tenancy.helpers import client_for, make_org, make_project, make_user, member, token_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def tenant():
    org = make_org("acme")
    project = make_project(org, "web")
    owner = make_user("owner@acme.test")
    member(owner, org, OrgRole.OWNER)
    return org, project, owner


@pytest.fixture
def staff_raw():
    return token_for(make_user("ops@provider.test", staff_role=StaffRole.OPERATOR), staff=True)


def _prefix(raw: str) -> str:
    prefix = tokens.parse_prefix(raw)
    assert prefix
    return prefix


def _compute(org, project, owner, staff_raw):
    raw = token_for(owner, project=project)
    return raw, "compute.ssh_key.create", ("/api/v1/ssh-keys/", {"project": str(project.pk), "name": "laptop",
                                                                 "public_key": ED25519})


def _networking(org, project, owner, staff_raw):
    raw = token_for(owner, project=project)
    return raw, "networking.vpc.create", ("/api/v1/vpcs/", {"project": str(project.pk), "name": "main",
                                                            "cidr": "10.0.0.0/16"})


def _tenancy(org, project, owner, staff_raw):
    raw = token_for(owner, organization=org)
    return raw, "project.create", ("/api/v1/projects/", {"organization": str(org.pk), "slug": "ml", "name": "ML"})


def _identity(org, project, owner, staff_raw):
    raw = token_for(owner, organization=org)
    return raw, "api_token.create", ("/api/v1/tokens/", {"name": "ci", "scope": "read", "organization": str(org.pk)})


def _billing(org, project, owner, staff_raw):
    raw = token_for(make_user("ba@provider.test", staff_role=StaffRole.BILLING_ADMIN), staff=True)
    return raw, "billing.sla_tier.create", ("/api/v1/sla-tiers/", {
        "code": "gold", "name": "Gold", "target_uptime_pct": "99.95",
        "credit_schedule": [{"below": "99.95", "credit_pct": "10"}], "support_response_minutes": 15})


def _inventory(org, project, owner, staff_raw):
    host = make_host("h1", gpus=1)
    return staff_raw, "inventory.host.cordon", (f"/api/v1/hosts/{host.pk}/cordon/", {"reason": "rack power work"})


def _reservations(org, project, owner, staff_raw):
    return staff_raw, "reservations.queue_priority.set", ("/api/v1/queue-priorities/", {"project": str(project.pk),
                                                                                         "priority": 5})


@pytest.mark.parametrize("case", [_compute, _networking, _tenancy, _identity, _billing, _inventory, _reservations],
                         ids=lambda c: c.__name__.strip("_"))
def test_token_authenticated_write_records_the_token_prefix(case, tenant, staff_raw):
    raw, action, (url, body) = case(*tenant, staff_raw)
    response = client_for(raw).post(url, body, format="json")
    assert response.status_code < 300, response.content
    event = AuditEvent.objects.get(action=action, request_id=response["X-Request-ID"])
    assert event.token_prefix == _prefix(raw) and event.actor_email


def test_session_write_and_system_event_record_no_token(tenant):
    org, project, owner = tenant
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(owner)
    assert client.post("/api/v1/projects/", {"organization": str(org.pk), "slug": "ml", "name": "ML"},
                       format="json").status_code == 201
    assert AuditEvent.objects.get(action="project.create").token_prefix == ""
