"""Print the demo staff accounts' authenticator code now (`manage.py demo_load` made their shared TOTP key)."""
from django.core.management.base import BaseCommand

from apps.tenancy.demo import STAFF, demo_totp_code


class Command(BaseCommand):
    help = "Print the current authenticator code of the demo staff accounts (ops@, billing@, support@example.com)."

    def handle(self, *args, **options):
        self.stdout.write(demo_totp_code())
        self.stderr.write(f"(valid for up to 30 s; accounts: {', '.join(email for email, _n, _r in STAFF)})")
