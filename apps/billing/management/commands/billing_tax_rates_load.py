"""`manage.py billing_tax_rates_load [FILE]`: load tax rates from a YAML file (default: the example rates shipped in
apps/billing/data/tax_rates.yaml; docs/billing.md, "Tax"). Safe to repeat: rows already loaded are skipped."""

from pathlib import Path

import yaml
from django.core.management.base import BaseCommand, CommandError

from apps.billing.services import tax_rates_load
from apps.core.errors import DomainError

DEFAULT = Path(__file__).resolve().parents[2] / "data" / "tax_rates.yaml"


class Command(BaseCommand):
    help = "Load tax rates (country, optional region, name, rate in percent, effective_from/to) from a YAML file."

    def add_arguments(self, parser):
        parser.add_argument("file", nargs="?", default=str(DEFAULT))

    def handle(self, *args, file, **options):
        rows = (yaml.safe_load(Path(file).read_text()) or {}).get("rates") or []
        try:
            created, unchanged = tax_rates_load(rows)
        except (DomainError, KeyError, ValueError) as exc:
            raise CommandError(f"{file}: {exc}") from exc
        self.stdout.write(f"tax rates: {created} created, {unchanged} already loaded ({file})")
