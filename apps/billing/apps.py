from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "apps.billing"
    label = "billing"

    def ready(self) -> None:
        from . import workflows  # noqa: F401  (registers the invoice-run workflow with the step runner)
