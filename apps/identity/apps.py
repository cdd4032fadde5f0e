from django.apps import AppConfig


class IdentityConfig(AppConfig):
    name = "apps.identity"
    label = "identity"

    def ready(self) -> None:
        from . import integrations, schema  # noqa: F401  (schema registers the OpenAPI authentication extensions)

        integrations.register()
