import io

import pytest
from django.core.management import call_command

from apps.identity.models import User
from apps.tenancy.demo import load_demo
from apps.tenancy.models import Membership, Organization, Project
from tests.tenancy.helpers import client_for


@pytest.mark.django_db
def test_demo_is_idempotent_and_its_printed_commands_work():
    out = io.StringIO()
    load_demo(out)
    load_demo(io.StringIO())
    assert Organization.objects.filter(slug="demo").count() == 1
    assert Project.objects.filter(slug="demo", organization__slug="demo").count() == 1
    assert Membership.objects.filter(user__email="demo@example.com", role="owner").count() == 1
    assert User.objects.get(email="ops@example.com").staff_role == "operator"
    commands = [line.split("manage.py ", 1)[1].split() for line in out.getvalue().splitlines()
                if "create_api_token" in line]
    assert len(commands) == 3
    for argv in commands:
        token_out = io.StringIO()
        call_command(*argv, stdout=token_out)
        assert client_for(token_out.getvalue().strip()).get("/api/v1/projects/").json()["results"][0]["slug"] == "demo"


@pytest.mark.django_db
def test_demo_owner_signs_in_to_the_console_with_the_printed_password(settings, tmp_path, monkeypatch):
    from rest_framework.test import APIClient

    monkeypatch.delenv("DEMO_PASSWORD", raising=False)
    settings.BASE_DIR = tmp_path
    out = io.StringIO()
    load_demo(out)
    load_demo(io.StringIO())  # the same password on the second load (kept in var/demo-password)
    line = next(line for line in out.getvalue().splitlines() if line.startswith("Demo console sign-in:"))
    email, password = line.split(": ", 1)[1].split(" / ")
    assert (tmp_path / "var" / "demo-password").read_text().strip() == password
    browser = APIClient(enforce_csrf_checks=True)
    csrf = browser.get("/api/v1/session/").json()["csrf_token"]
    signed_in = browser.post("/api/v1/session/", {"email": email, "password": password}, format="json",
                             HTTP_X_CSRFTOKEN=csrf)
    assert signed_in.status_code == 200, signed_in.json()
    assert signed_in.json()["authenticated"] is True
    assert browser.get("/api/v1/projects/").json()["results"][0]["can_write"] is True


@pytest.mark.django_db
def test_demo_staff_sign_in_with_the_printed_password_and_code(settings, tmp_path, monkeypatch):
    """`make run` prints a sign-in per staff role; each signs in with the password and the code `demo_code` prints
    and gets its role from /me/."""
    from rest_framework.test import APIClient

    monkeypatch.delenv("DEMO_PASSWORD", raising=False)
    settings.BASE_DIR = tmp_path
    out = io.StringIO()
    load_demo(out)
    load_demo(io.StringIO())  # the same key on the second load
    staff = dict(line.split(" sign-in (", 1)[1].split("): ", 1) for line in out.getvalue().splitlines()
                 if line.startswith("Staff console sign-in ("))
    assert set(staff) == {"Operator", "Billing admin", "Support (read-only)"}
    assert "otpauth://totp/" in out.getvalue()
    assert (tmp_path / "var" / "demo-totp-key").stat().st_mode & 0o077 == 0
    roles = {}
    for label, sign_in in staff.items():
        email, password = sign_in.split(" / ")
        browser = APIClient(enforce_csrf_checks=True)
        csrf = browser.get("/api/v1/session/").json()["csrf_token"]
        refused = browser.post("/api/v1/session/", {"email": email, "password": password}, format="json",
                               HTTP_X_CSRFTOKEN=csrf)
        assert refused.json()["code"] == "otp_required", refused.json()   # the console then asks for the code
        code = io.StringIO()
        call_command("demo_code", stdout=code, stderr=io.StringIO())
        signed_in = browser.post("/api/v1/session/", {"email": email, "password": password,
                                                      "otp_token": code.getvalue().strip()}, format="json",
                                 HTTP_X_CSRFTOKEN=csrf)
        assert signed_in.status_code == 200, signed_in.json()
        roles[label] = browser.get("/api/v1/me/").json()["staff_role"]
    assert roles == {"Operator": "operator", "Billing admin": "billing_admin", "Support (read-only)": "support"}
