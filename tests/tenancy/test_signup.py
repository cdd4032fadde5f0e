"""Self sign-up with e-mail verification: off by default; when on, one verified e-mail → one trial org."""
import pytest
from django.core import mail

from apps.identity.models import User
from apps.tenancy.models import Membership, Organization
from tests.tenancy.helpers import client_for


@pytest.mark.django_db
def test_signup_is_off_by_default():
    r = client_for(None).post("/api/v1/signup/", {"email": "a@example.test"})
    assert (r.status_code, r.json()["code"]) == (404, "not_found")
    assert mail.outbox == []


@pytest.mark.django_db(transaction=True)
def test_signup_creates_trial_org_once(settings):
    settings.SIGNUP_ENABLED = True
    anonymous = client_for(None)
    assert anonymous.post("/api/v1/signup/", {"email": "Founder@Startup.test"}).status_code == 202
    token = mail.outbox[0].body.split("?token=")[1].split()[0]
    body = {"token": token, "password": "a-long-password-42", "organization_slug": "startup"}
    r = anonymous.post("/api/v1/signup/verify/", body)
    assert r.status_code == 201, r.content
    org = Organization.objects.get(slug="startup")
    assert org.plan == "trial"
    assert Membership.objects.get(organization=org, project=None).user.email == "founder@startup.test"
    r = anonymous.post("/api/v1/signup/verify/", {**body, "organization_slug": "startup2"})
    assert (r.status_code, r.json()["code"]) == (409, "signup_already_used")
    r = anonymous.post("/api/v1/signup/verify/", {**body, "token": token + "x"})
    assert (r.status_code, r.json()["code"]) == (400, "signup_invalid")
    assert User.objects.count() == 1 and Organization.objects.count() == 1
