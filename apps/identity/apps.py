from django.apps import AppConfig


class IdentityConfig(AppConfig):
    name = "apps.identity"
    label = "identity"

    def ready(self) -> None:
        from . import schema  # noqa: F401  (registers the OpenAPI authentication extensions)
