from django.apps import AppConfig


class NetworkingConfig(AppConfig):
    name = "apps.networking"
    label = "networking"

    def ready(self) -> None:
        from . import integrations

        integrations.register()
