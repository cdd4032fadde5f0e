from django.apps import AppConfig


class ReservationsConfig(AppConfig):
    name = "apps.reservations"
    label = "reservations"
    verbose_name = "Capacity products (leases, on-demand queue, spot)"

    def ready(self) -> None:
        from . import integrations

        integrations.register()
