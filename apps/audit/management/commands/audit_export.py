"""`manage.py audit_export [--after-seq N] [--limit M]`: the chained audit events as JSON Lines on stdout, for a
SIEM (ADR 0111). Ship incrementally with `--after-seq` = the last `seq` already shipped."""
from django.core.management.base import BaseCommand

from apps.audit.selectors import audit_export_lines


class Command(BaseCommand):
    help = "Write audit events after a chain position as JSON Lines (one event per line)."

    def add_arguments(self, parser):
        parser.add_argument("--after-seq", type=int, default=0)
        parser.add_argument("--limit", type=int, default=None)

    def handle(self, *args, after_seq, limit, **options):
        for line in audit_export_lines(after_seq=after_seq, limit=limit):
            self.stdout.write(line)
