from django.apps import AppConfig


class OperationsConfig(AppConfig):
    name = "apps.operations"
    label = "operations"

    def ready(self):
        from apps.core.metrics import register_collector

        from . import metrics, signals  # noqa: F401  (signals: worker_ready hook resumes unfinished operations)

        register_collector(metrics.COLLECTOR)
