"""Load the demo data of every app: each `apps.<name>.demo` module may define `load_demo(stdout)`.

Order follows INSTALLED_APPS (tenancy before inventory before scheduling ...). Idempotent: each loader must
leave the same data when run again.
"""
import importlib

from django.apps import apps as django_apps
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Load the demo tenant, its token instructions and the sample fleet (idempotent)."

    def handle(self, *args, **options):
        for config in django_apps.get_app_configs():
            if not config.name.startswith("apps."):
                continue
            try:
                module = importlib.import_module(f"{config.name}.demo")
            except ModuleNotFoundError as exc:
                if exc.name != f"{config.name}.demo":
                    raise
                continue
            loader = getattr(module, "load_demo", None)
            if loader is not None:
                loader(self.stdout)
