"""`manage.py fleet import FILE [--dry-run | --yes]` and `manage.py fleet export [--output FILE]`.

Import validates the whole file first (errors name the line; nothing is written), prints the diff, then applies
it in one transaction when `--yes` is given or the operator answers `y`. Re-importing an unchanged file prints
"No changes." Format: docs/fleet-format.md.
"""
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.core.errors import ValidationFailed

from ...fleet.export import fleet_export_yaml
from ...services.fleet import fleet_import


class Command(BaseCommand):
    help = "Import or export the fleet description (YAML)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        imp = sub.add_parser("import", help="validate, diff and apply a fleet file")
        imp.add_argument("file")
        imp.add_argument("--dry-run", action="store_true", help="only print the diff")
        imp.add_argument("--yes", action="store_true", help="apply without asking")
        exp = sub.add_parser("export", help="write the inventory as YAML")
        exp.add_argument("--output", "-o", help="file (default: stdout)")

    def handle(self, *args, **options):
        if options["action"] == "export":
            text = fleet_export_yaml()
            if options.get("output"):
                Path(options["output"]).write_text(text)
            else:
                self.stdout.write(text, ending="")
            return
        self._import(options)

    def _import(self, options):
        try:
            text = Path(options["file"]).read_text()
        except OSError as exc:
            raise CommandError(f"cannot read {options['file']}: {exc}") from exc
        try:
            plan = fleet_import(actor=None, document=text, dry_run=True)
        except ValidationFailed as exc:
            for line in (exc.errors or {}).get("document", []):
                self.stderr.write(f"{options['file']}: {line}")
            raise CommandError(exc.detail) from exc
        if not plan.changes:
            self.stdout.write("No changes.")
            return
        for line in plan.diff_lines():
            self.stdout.write(line)
        self.stdout.write(f"summary: {plan.summary()}")
        if options["dry_run"]:
            self.stdout.write("Dry run: nothing written.")
            return
        if not options["yes"]:
            if not sys.stdin.isatty():
                self.stdout.write("Not applied: pass --yes to apply without a terminal.")
                return
            if input("Apply these changes? [y/N] ").strip().lower() not in ("y", "yes"):
                self.stdout.write("Not applied.")
                return
        fleet_import(actor=None, document=text, dry_run=False)
        self.stdout.write(self.style.SUCCESS(f"Applied {len(plan.changes)} change(s)."))
