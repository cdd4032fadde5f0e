"""The invitation, sign-up and single sign-on failure pages say what went wrong and what to do next in words, with
the form's labels for refused fields; the refusal's code is not in the page's text (only in a collapsed details element,
for support)."""
import re
from html import unescape

import pytest
from django.core import mail
from django.test import Client
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


def _visible_text(html: str) -> str:
    """What a person reads on the page: the text outside tags, without the collapsed `<details>` (for support)."""
    html = re.sub(r"<details.*?</details>", "", html, flags=re.S)
    html = re.sub(r"<(style|script)\b.*?</\1>", "", html, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_a_refusal_is_shown_in_words_with_the_code_only_in_a_details_element(django_capture_on_commit_callbacks):
    org, _owner, owner_client = org_owner_client("acme", "owner@acme.test")
    with django_capture_on_commit_callbacks(execute=True):
        assert owner_client.post("/api/v1/invitations/", {"organization": str(org.pk), "email": "new@acme.test",
                                                          "role": "member"}).status_code == 201
    token = mail.outbox[-1].body.split("?token=")[1].split()[0]
    client = Client()
    client.get("/invitations/accept", {"token": token})
    page = client.post("/invitations/accept", {"token": token, "password": "short", "full_name": "New"})
    html = page.content.decode()
    assert page.status_code == 400, html
    shown = _visible_text(html)
    assert "validation_error" not in shown and "Reason code" not in shown, shown
    assert re.search(r'<input name="full_name"[^>]*value="New"', html), html     # what was typed is kept
    assert 'role="alert"' in html
    assert re.search(r"<details[^>]*><summary>Details for support</summary>Reason code: <code>validation_error</code>",
                     html), html


@pytest.mark.django_db(transaction=True)
def test_the_sign_up_page_names_refused_fields_by_their_labels(settings):
    settings.SIGNUP_ENABLED = True
    client = Client()
    assert client.post("/api/v1/signup/", {"email": "founder@startup.test"}).status_code == 202
    token = mail.outbox[-1].body.split("?token=")[1].split()[0]
    page = client.post("/signup/verify", {"token": token, "password": "a-long-password-42",
                                          "organization_slug": "not a slug!"})
    html = page.content.decode()
    assert page.status_code == 400, html
    shown = _visible_text(html)
    assert "Organization short name: a slug, e.g. acme-ml" in shown, shown
    assert "organization_slug" not in shown and "Reason code" not in shown, shown
    assert re.search(r"<details><summary>Details for support</summary>Reason code: <code>validation_error</code>", html)


def test_a_failed_single_sign_on_says_what_to_do_with_the_code_only_for_support():
    page = Client().get("/sign-in/failed", {"reason": "no_account"})
    shown = unescape(_visible_text(page.content.decode()))
    assert page.status_code == 200
    assert "Ask your organization's owner for an invitation" in shown and "sign in with your password" in shown
    assert "no_account" not in shown and "Reason code" not in shown, shown
