from django.apps import AppConfig


class ComputeConfig(AppConfig):
    name = "apps.compute"
    label = "compute"
    verbose_name = "Compute"

    def ready(self) -> None:
        from . import workflows  # noqa: F401  (registers the instance workflows with the step runner)
        from .billing import register as register_billing
        from .selectors import register_quota_counters

        register_quota_counters()
        register_billing()
