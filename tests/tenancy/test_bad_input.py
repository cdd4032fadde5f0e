"""Bad input: unknown role, duplicate membership, last owner, invitation used twice or expired.

Each is a 4xx problem+json with a stable code and changes nothing (memberships, invitations, users and audit
events are counted before and after)."""
import datetime as dt

import pytest
import time_machine
from django.core import mail

from apps.audit.models import AuditEvent
from apps.identity.models import User
from apps.tenancy.models import Invitation, Membership, OrgRole

from .helpers import client_for, make_org, make_project, make_user, member, token_for


@pytest.fixture
def acme(db):
    org = make_org("acme")
    owner = make_user("owner@acme.test")
    member(owner, org, OrgRole.OWNER)
    make_user("dev@acme.test")
    return org, owner, client_for(token_for(owner, organization=org))


def _state():
    return (Membership.objects.count(), Invitation.objects.filter(accepted_at__isnull=False).count(),
            User.objects.count(), AuditEvent.objects.exclude(action="api.request.refused").count(),
            sorted(Membership.objects.values_list("user__email", "role")))


def _problem(response, status, code):
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == code
    assert response.json()["status"] == status


def test_unknown_role(acme):
    org, _owner, client = acme
    before = _state()
    r = client.post("/api/v1/memberships/", {"organization": str(org.pk), "user_email": "dev@acme.test",
                                             "role": "superuser"})
    _problem(r, 400, "unknown_role")
    project = make_project(org, "p")
    before = _state()
    r = client.post("/api/v1/memberships/", {"organization": str(org.pk), "project": str(project.pk),
                                             "user_email": "dev@acme.test", "role": "owner"})  # org-only role
    _problem(r, 400, "unknown_role")
    r = client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "x@acme.test", "role": "god"})
    _problem(r, 400, "unknown_role")
    assert _state() == before


def test_duplicate_membership(acme):
    org, _owner, client = acme
    body = {"organization": str(org.pk), "user_email": "dev@acme.test", "role": "member"}
    assert client.post("/api/v1/memberships/", body).status_code == 202  # an invitation
    _problem(client.post("/api/v1/memberships/", {**body, "role": "viewer"}), 409, "invitation_pending")
    member(User.objects.get(email="dev@acme.test"), org, OrgRole.MEMBER)
    before = _state()
    _problem(client.post("/api/v1/memberships/", {**body, "role": "viewer"}), 409, "duplicate_membership")
    _problem(client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "DEV@acme.test",
                                                  "role": "admin"}), 409, "duplicate_membership")
    assert _state() == before


def test_removing_or_demoting_the_last_owner(acme):
    org, owner, client = acme
    own = Membership.objects.get(user=owner, organization=org)
    before = _state()
    _problem(client.delete(f"/api/v1/memberships/{own.pk}/"), 409, "last_owner")
    _problem(client.patch(f"/api/v1/memberships/{own.pk}/", {"role": "admin"}), 409, "last_owner")
    assert _state() == before
    # with a second owner the first may step down
    second = make_user("second@acme.test")
    member(second, org, OrgRole.OWNER)
    assert client.patch(f"/api/v1/memberships/{own.pk}/", {"role": "admin"}).status_code == 200


def test_admin_cannot_grant_owner(acme):
    org, _owner, _client = acme
    admin = make_user("admin@acme.test")
    member(admin, org, OrgRole.ADMIN)
    client = client_for(token_for(admin, organization=org))
    before = _state()
    r = client.post("/api/v1/memberships/", {"organization": str(org.pk), "user_email": "dev@acme.test",
                                             "role": "owner"})
    _problem(r, 403, "owner_required")
    assert _state() == before


@pytest.mark.django_db(transaction=True)
def test_invitation_used_twice_or_expired():
    org = make_org("acme")
    owner = make_user("owner@acme.test")
    member(owner, org, OrgRole.OWNER)
    client = client_for(token_for(owner, organization=org))
    mail.outbox.clear()
    assert client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "new@acme.test",
                                                "role": "member"}).status_code == 201
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["new@acme.test"]
    token = mail.outbox[0].body.split("?token=")[1].split()[0]
    anonymous = client_for(None)
    first = anonymous.post("/api/v1/invitations/accept/", {"token": token, "password": "a-long-password-42"})
    assert first.status_code == 201, first.content
    assert first.json()["role"] == "member" and first.json()["user_email"] == "new@acme.test"
    before = _state()
    _problem(anonymous.post("/api/v1/invitations/accept/", {"token": token, "password": "a-long-password-42"}),
             409, "invitation_already_used")
    _problem(anonymous.post("/api/v1/invitations/accept/", {"token": token[:-2] + "xx"}), 400, "invitation_invalid")
    assert _state() == before

    mail.outbox.clear()
    client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "late@acme.test", "role": "viewer"})
    late = mail.outbox[0].body.split("?token=")[1].split()[0]
    before = _state()
    with time_machine.travel(dt.datetime.now(dt.UTC) + dt.timedelta(days=8), tick=False):
        _problem(anonymous.post("/api/v1/invitations/accept/", {"token": late, "password": "a-long-password-42"}),
                 410, "invitation_expired")
    assert _state() == before
    assert not User.objects.filter(email="late@acme.test").exists()
