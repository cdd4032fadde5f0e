"""What billing plugs into other apps, registered once from `BillingConfig.ready`: the invoice-run workflow
``billing.invoice_run`` with the operations step runner (`workflows`); the check and re-rating of an inventory
incident's correction (`services.corrections`); the Prometheus collector of invoice runs and invoices
(`metrics.BillingCollector`) in core's registry."""
from __future__ import annotations


def register() -> None:
    from apps.core.metrics import register_collector
    from apps.inventory.services.hosts import register_incident_change_hook

    from . import metrics, workflows  # noqa: F401  (its module body registers the invoice-run workflow)
    from .services.corrections import incident_correction_apply

    register_incident_change_hook(incident_correction_apply)
    register_collector(metrics.COLLECTOR)
