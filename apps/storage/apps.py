from django.apps import AppConfig


class StorageConfig(AppConfig):
    name = "apps.storage"
    label = "storage"
    verbose_name = "Block storage"

    def ready(self) -> None:
        from . import integrations

        integrations.register()
