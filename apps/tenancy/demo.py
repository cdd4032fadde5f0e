"""Demo tenant for `manage.py demo_load` (idempotent): organization `demo`, project `demo`, owner
demo@example.com, and the provider's staff, one account per staff role: ops@example.com (operator),
billing@example.com (billing admin), support@example.com (support, read-only). Prints the sign-ins and how to get
tokens.

Every demo account signs in to the web console with a password that is local to this checkout: `DEMO_PASSWORD`
when set, else the one kept in `var/demo-password` (created at random on the first load, never committed). Staff
must also give an authenticator code (`STAFF_REQUIRE_2FA`): the staff accounts share one TOTP key, kept in
`var/demo-totp-key` (made on the first load, 0600), printed as an ``otpauth://`` URI for an authenticator app;
`manage.py demo_code` prints the current code. Both are printed for the developer who runs `make run`; nothing
else is.
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.conf import settings
from django.db import transaction

from apps.identity.models import StaffRole, User

from .models import Membership, Organization, OrgRole, Project, Quota
from .quotas import PLANS

OWNER = "demo@example.com"
OPERATOR = "ops@example.com"
BILLING = "billing@example.com"
SUPPORT = "support@example.com"
# the staff accounts of the demo: e-mail, full name, role
STAFF = ((OPERATOR, "Demo Operator", StaffRole.OPERATOR), (BILLING, "Demo Billing Admin", StaffRole.BILLING_ADMIN),
         (SUPPORT, "Demo Support", StaffRole.SUPPORT))


def demo_password() -> str:
    """The demo owner's console password: `DEMO_PASSWORD`, else `var/demo-password` (made on first use)."""
    if os.environ.get("DEMO_PASSWORD"):
        return os.environ["DEMO_PASSWORD"]
    path = Path(settings.BASE_DIR) / "var" / "demo-password"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"demo-{secrets.token_urlsafe(9)}\n")
        path.chmod(0o600)
    return path.read_text().strip()


def demo_totp_key() -> str:
    """The demo staff accounts' TOTP key (40 hex digits, django-otp's form), kept in `var/demo-totp-key`."""
    path = Path(settings.BASE_DIR) / "var" / "demo-totp-key"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_hex(20) + "\n")
        path.chmod(0o600)
    return path.read_text().strip()


def demo_totp_uri(email: str) -> str:
    """``otpauth://`` URI of the demo key for `email` (what an authenticator app scans or takes typed in)."""
    from base64 import b32encode
    from urllib.parse import quote

    secret = b32encode(bytes.fromhex(demo_totp_key())).decode().rstrip("=")
    return f"otpauth://totp/gpucloud%20demo:{quote(email)}?secret={secret}&issuer=gpucloud%20demo"


def demo_totp_code() -> str:
    """The demo staff accounts' authenticator code now (6 digits, 30 s steps)."""
    from django_otp.oath import totp

    return str(totp(bytes.fromhex(demo_totp_key()), step=30, t0=0, digits=6)).zfill(6)


def _staff_accounts(password: str) -> None:
    """The demo staff accounts with the demo password and a confirmed TOTP device of the demo key (a changed key or
    password file is taken up on the next load)."""
    from django_otp.plugins.otp_totp.models import TOTPDevice

    key = demo_totp_key()
    for email, name, role in STAFF:
        user = User.objects.filter(email=email).first() or User.objects.create_user(email, full_name=name,
                                                                                    staff_role=role)
        if not user.check_password(password):
            user.set_password(password)
            user.save(update_fields=["password"])
        if not TOTPDevice.objects.filter(user=user, confirmed=True, key=key).exists():
            TOTPDevice.objects.filter(user=user).delete()
            TOTPDevice.objects.create(user=user, name="demo", key=key, confirmed=True)


def load_demo(stdout) -> None:
    with transaction.atomic():
        org, created = Organization.objects.get_or_create(
            slug="demo", defaults={"name": "Demo", "legal_name": "Demo Inc.", "billing_email": OWNER})
        if created:
            Quota.objects.bulk_create([Quota(organization=org, resource=r, limit=v)
                                       for r, v in PLANS[org.plan].items()])
        Project.objects.get_or_create(organization=org, slug="demo", defaults={"name": "Demo"})
        owner = User.objects.filter(email=OWNER).first() or User.objects.create_user(OWNER, full_name="Demo Owner")
        Membership.objects.get_or_create(user=owner, organization=org, project=None,
                                         defaults={"role": OrgRole.OWNER})
        password = demo_password()
        if not owner.check_password(password):
            owner.set_password(password)
            owner.save(update_fields=["password"])
        _staff_accounts(password)
    stdout.write(f"Demo console sign-in: {OWNER} / {password}\n")
    for email, _name, role in STAFF:
        stdout.write(f"Staff console sign-in ({role.label}): {email} / {password}\n")
    stdout.write(f"Staff authenticator code: .venv/bin/python manage.py demo_code  (or add the key to an authenticator "
                 f"app: {demo_totp_uri(OPERATOR)})\n")
    stdout.write("Demo tenant: organization 'demo', project 'demo', owner demo@example.com; "
                 "staff operator ops@example.com. Get API tokens with:\n"
                 f"  .venv/bin/python manage.py create_api_token --email {OWNER} --project demo/demo --scope write\n"
                 f"  .venv/bin/python manage.py create_api_token --email {OWNER} --organization demo --scope write\n"
                 f"  .venv/bin/python manage.py create_api_token --email {OPERATOR} --staff --scope write\n"
                 f"then: curl -H 'Authorization: Bearer <token>' http://127.0.0.1:{os.environ.get('PORT', '8000')}"
                 "/api/v1/projects/\n")
