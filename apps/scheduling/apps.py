from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "apps.scheduling"
    label = "scheduling"

    def ready(self) -> None:
        from .selectors import register_quota_counters

        register_quota_counters()
