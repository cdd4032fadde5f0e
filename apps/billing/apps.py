from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "apps.billing"
    label = "billing"

    def ready(self) -> None:
        from . import checks, integrations  # noqa: F401  (checks: registers the system checks)

        integrations.register()
