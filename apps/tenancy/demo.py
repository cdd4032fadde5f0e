"""Demo tenant for `manage.py demo_load` (idempotent): organization `demo`, project `demo`, owner
demo@example.com, staff operator ops@example.com. Prints how to get tokens.

The owner signs in to the web console with a password that is local to this checkout: `DEMO_PASSWORD` when set,
else the one kept in `var/demo-password` (created at random on the first load, never committed). It is printed
for the developer who runs `make run`; nothing else is.
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
        if not User.objects.filter(email=OPERATOR).exists():
            User.objects.create_user(OPERATOR, full_name="Demo Operator", staff_role=StaffRole.OPERATOR)
    stdout.write(f"Demo console sign-in: {OWNER} / {password}\n")
    stdout.write("Demo tenant: organization 'demo', project 'demo', owner demo@example.com; "
                 "staff operator ops@example.com. Get API tokens with:\n"
                 f"  .venv/bin/python manage.py create_api_token --email {OWNER} --project demo/demo --scope write\n"
                 f"  .venv/bin/python manage.py create_api_token --email {OWNER} --organization demo --scope write\n"
                 f"  .venv/bin/python manage.py create_api_token --email {OPERATOR} --staff --scope write\n"
                 f"then: curl -H 'Authorization: Bearer <token>' http://127.0.0.1:{os.environ.get('PORT', '8000')}"
                 "/api/v1/projects/\n")
