from django.apps import AppConfig


class OperationsConfig(AppConfig):
    name = "apps.operations"
    label = "operations"

    def ready(self):
        from . import signals  # noqa: F401  (worker_ready hook resumes unfinished operations)
