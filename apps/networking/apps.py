from django.apps import AppConfig


class NetworkingConfig(AppConfig):
    name = "apps.networking"
    label = "networking"

    def ready(self) -> None:
        from . import selectors

        selectors.register_quota_counters()
        selectors.register_billing_sources()
