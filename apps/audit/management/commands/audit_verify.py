"""`manage.py audit_verify`: recompute the audit hash chain (ADR 0111). Prints the head (seq and hash) when intact;
otherwise names the first broken link and exits with status 1."""
from django.core.management.base import BaseCommand, CommandError

from apps.audit.selectors import audit_chain_verify


class Command(BaseCommand):
    help = "Verify the audit events' hash chain and report the first broken link."

    def handle(self, *args, **options):
        report = audit_chain_verify()
        if report.broken is not None:
            b = report.broken
            raise CommandError(f"audit chain broken: {b.reason} at seq {b.seq} (event {b.event_id}); "
                               f"{report.checked} links good up to seq {report.head_seq} hash {report.head_hash}")
        self.stdout.write(f"audit chain intact: {report.checked} events, head seq {report.head_seq} "
                          f"hash {report.head_hash}")
