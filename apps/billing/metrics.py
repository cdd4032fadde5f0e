"""Prometheus metrics of invoice runs, computed from the database at scrape time (core's `ScrapeTimeCollector`),
so every web process reports the same figures whichever worker or beat ran them.

- ``gpucloud_invoice_runs{status}``: invoice runs by status (pending, running, completed, failed), all time;
  alert on ``increase(gpucloud_invoice_runs{status="failed"}[1d]) > 0``.
- ``gpucloud_invoice_run_last_finished_timestamp_seconds{status}``: Unix time the last run of a status finished
  (``completed`` or ``failed``); alert when ``time() - ...{status="completed"}`` passes a month and a few days.
- ``gpucloud_invoices{status}``: invoices by status (draft, finalized, ...).
"""
from __future__ import annotations

from django.db.models import Count, Max
from prometheus_client.core import GaugeMetricFamily

from apps.core.metrics import ScrapeTimeCollector

from .models import Invoice, InvoiceRun
from .states import InvoiceStatus, RunStatus


class BillingCollector(ScrapeTimeCollector):
    def families(self):
        runs = GaugeMetricFamily("gpucloud_invoice_runs", "Invoice runs by status.", labels=["status"])
        last = GaugeMetricFamily("gpucloud_invoice_run_last_finished_timestamp_seconds", "Unix time the last "
                                 "invoice run of a status finished.", labels=["status"])
        rows = {r["status"]: r for r in InvoiceRun.objects.order_by().values("status")
                .annotate(n=Count("id"), at=Max("finished_at"))}
        for status in RunStatus.values:
            runs.add_metric([status], rows[status]["n"] if status in rows else 0)
            if status in rows and rows[status]["at"]:
                last.add_metric([status], rows[status]["at"].timestamp())
        invoices = GaugeMetricFamily("gpucloud_invoices", "Invoices by status.", labels=["status"])
        counts = dict(Invoice.objects.order_by().values_list("status").annotate(n=Count("id")))
        for status in InvoiceStatus.values:
            invoices.add_metric([status], counts.get(status, 0))
        yield from (runs, last, invoices)


#: The one collector of this module; `integrations.register` adds it to core's registry once.
COLLECTOR = BillingCollector()
