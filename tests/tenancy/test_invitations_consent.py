"""Adding someone to an organization or project is an invitation they accept: an owner could add any user of
the platform by e-mail without consent, and `user_not_found` told anyone which e-mails have an account. Project
admins invite to their project (they manage its members), and the e-mailed links land on pages that exist."""
import re

import pytest
from django.core import mail
from django.test import Client
from rest_framework.test import APIClient

from apps.identity.models import User
from apps.tenancy.models import Invitation, Membership, OrgRole

from .helpers import client_for, make_org, make_project, make_user, member, org_owner_client, token_for

pytestmark = pytest.mark.django_db


def _link(message) -> str:
    return re.search(r"https?://\S+", message.body).group(0)


def _shape(body: dict) -> dict:
    """The body with the values that differ per row (ids, e-mail, times) replaced by their types."""
    return {k: type(v).__name__ for k, v in body.items()}


def test_adding_an_existing_user_invites_and_never_reveals_accounts(django_capture_on_commit_callbacks):
    org, _owner, client = org_owner_client()
    make_user("known@else.test")
    answers = []
    with django_capture_on_commit_callbacks(execute=True):
        for email in ("known@else.test", "nobody@else.test"):
            r = client.post("/api/v1/memberships/", {"organization": str(org.pk), "user_email": email,
                                                     "role": "member"})
            answers.append((r.status_code, _shape(r.json()), r.json()["status"]))
    assert answers[0] == answers[1] == (202, answers[0][1], "pending")
    assert not Membership.objects.filter(user__email="known@else.test").exists()  # no consent yet
    assert sorted(m.to[0] for m in mail.outbox) == ["known@else.test", "nobody@else.test"]
    # the known user accepts while signed in, and only then is a member
    known = User.objects.get(email="known@else.test")
    invite = next(m for m in mail.outbox if m.to == ["known@else.test"])
    token = invite.body.split("?token=")[1].split()[0]
    # an API token of the user cannot accept for them (a leaked token must not join its user to an organization
    # whose owners would then see the user's security events): 403, nothing written
    r = client_for(token_for_user_without_org(known)).post("/api/v1/invitations/accept/", {"token": token})
    assert (r.status_code, r.json()["code"]) == (403, "interactive_session_required"), r.content
    assert not Membership.objects.filter(user=known, organization=org).exists()
    assert Invitation.objects.get(email="known@else.test").accepted_at is None
    session = APIClient()
    session.force_login(known)
    r = session.post("/api/v1/invitations/accept/", {"token": token}, format="json")
    assert r.status_code == 201, r.content
    assert Membership.objects.get(user=known, organization=org).role == "member"


def token_for_user_without_org(user) -> str:
    """A write token of a user who belongs to no organization yet: a project-less, organization-less token does
    not exist, so bind it to an organization of its own (it is still the user's own credential)."""
    own = make_org(f"own-{user.pk.hex[:8]}")
    member(user, own, OrgRole.OWNER)
    return token_for(user, organization=own)


def test_project_admin_invites_to_their_project_only(django_capture_on_commit_callbacks):
    org, _owner, _client = org_owner_client()
    web, ml = make_project(org, "web"), make_project(org, "ml")
    lead = make_user("lead@acme.test")
    member(lead, org, "admin", project=web)
    c = client_for(token_for(lead, project=web))
    with django_capture_on_commit_callbacks(execute=True):
        r = c.post("/api/v1/invitations/", {"organization": str(org.pk), "project": str(web.pk),
                                            "email": "contractor@else.test", "role": "member"})
    assert r.status_code == 201, r.content
    assert [row["id"] for row in c.get("/api/v1/invitations/").json()["results"]] == [r.json()["id"]]
    r = c.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "x@else.test", "role": "member"})
    assert (r.status_code, r.json()["code"]) == (403, "permission_denied")
    r = c.post("/api/v1/invitations/", {"organization": str(org.pk), "project": str(ml.pk),
                                        "email": "x@else.test", "role": "member"})
    assert r.status_code == 400  # another project is not visible through this project token
    assert Invitation.objects.count() == 1
    pending = Invitation.objects.get()
    assert c.delete(f"/api/v1/invitations/{pending.pk}/").status_code == 204


def test_invitation_link_lands_on_a_page_that_accepts_it(django_capture_on_commit_callbacks):
    org, _owner, client = org_owner_client()
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "new@else.test",
                                             "role": "viewer"})
    link = _link(mail.outbox[0])
    path = link.split("://", 1)[1].split("/", 1)[1]
    browser = Client(enforce_csrf_checks=True)
    page = browser.get("/" + path)
    assert page.status_code == 200 and "Acme" in page.content.decode() and "viewer" in page.content.decode()
    csrf = page.cookies["csrftoken"].value
    token = path.split("token=")[1]
    done = browser.post("/invitations/accept", {"token": token, "password": "a-long-password-42",
                                                "full_name": "New Person", "csrfmiddlewaretoken": csrf})
    assert done.status_code == 201, done.content
    assert Membership.objects.get(user__email="new@else.test", organization=org).role == "viewer"
    again = browser.get("/" + path)
    assert again.status_code == 409 and "invitation_already_used" in again.content.decode()
    assert browser.get("/invitations/accept?token=forged").status_code == 400


def test_signup_link_lands_on_a_page_that_creates_the_account(settings, django_capture_on_commit_callbacks):
    settings.SIGNUP_ENABLED = True
    with django_capture_on_commit_callbacks(execute=True):
        assert Client().post("/api/v1/signup/", {"email": "founder@new.test"},
                             content_type="application/json").status_code == 202
    link = _link(mail.outbox[0])
    path = "/" + link.split("://", 1)[1].split("/", 1)[1]
    browser = Client()
    assert browser.get(path).status_code == 200
    token = path.split("token=")[1]
    bad = browser.post("/signup/verify", {"token": token, "password": "a-long-password-42",
                                          "organization_slug": "not a slug"})
    assert bad.status_code == 400 and not User.objects.filter(email="founder@new.test").exists()
    done = browser.post("/signup/verify", {"token": token, "password": "a-long-password-42",
                                           "organization_slug": "newco"})
    assert done.status_code == 201, done.content
    assert Membership.objects.get(user__email="founder@new.test").role == OrgRole.OWNER
    settings.SIGNUP_ENABLED = False
    assert browser.get(path).status_code == 404
