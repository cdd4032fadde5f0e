from django.apps import AppConfig


class BaremetalConfig(AppConfig):
    name = "apps.baremetal"
    label = "baremetal"
    verbose_name = "Bare metal"

    def ready(self) -> None:
        from . import integrations

        integrations.register()
