from django.apps import AppConfig


class HealthConfig(AppConfig):
    name = "apps.health"
    label = "health"

    def ready(self) -> None:
        from .classification import classification_load

        classification_load()  # a broken classification.yaml fails the start, not the first fault

        from apps.compute.selectors import register_maintenance_provider

        from .selectors import maintenance_by_instance

        register_maintenance_provider(maintenance_by_instance)  # the instance's `maintenance` field

        from apps.core.metrics import register_collector

        from . import metrics

        register_collector(metrics.COLLECTOR)  # /metrics: events by class, GPUs in repair, drain/recover times

        from apps.inventory.services.hosts import register_spare_ready_hook

        from .services.lease_spares import spare_ready

        register_spare_ready_hook(spare_ready)  # a new or returned spare goes to the oldest lease held for one

        from apps.inventory.services.agent import register_device_missing_hook

        from .services.ingest import device_missing_after_reboot

        register_device_missing_hook(device_missing_after_reboot)  # a GPU lost in a reboot: device_op_failed
