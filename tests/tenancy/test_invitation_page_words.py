"""The invitation page says what to do next when the link cannot be used, not only the refusal's code."""
import pytest
from django.core import mail
from rest_framework.test import APIClient

from .helpers import org_owner_client

pytestmark = pytest.mark.django_db


def test_a_used_invitation_tells_the_person_to_sign_in(django_capture_on_commit_callbacks):
    org, _owner, owner_client = org_owner_client("acme", "owner@acme.test")
    with django_capture_on_commit_callbacks(execute=True):
        assert owner_client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "new@acme.test",
                                                          "role": "member"}).status_code == 201
    token = mail.outbox[-1].body.split("?token=")[1].split()[0]
    anonymous = APIClient()
    assert anonymous.post("/api/v1/invitations/accept/", {"token": token, "password": "a-long-password-42"},
                          format="json").status_code == 201
    page = APIClient().get("/invitations/accept", {"token": token})
    html = page.content.decode()
    assert page.status_code == 409
    assert 'id="next-step"' in html and "sign in to the console" in html and 'href="/sign-in"' in html
