"""Thin Celery entry points of the billing app (queue `billing`). Each is idempotent: running it again, or after
a crash, adds nothing twice."""
import datetime as dt

from celery import shared_task

from apps.core.clock import now

from . import conf
from .periods import period_of, previous_period
from .services import invoice_run_execute, usage_record_collect
from .services.metering import last_closed_boundary

CATCH_UP_PERIODS = 24


@shared_task(name="billing.usage_record_collect_task")
def usage_record_collect_task() -> dict:
    """Record the last CATCH_UP_PERIODS closed metering periods from every usage source (beat: once per metering period, at most hourly; `schedule.collection_schedule`)."""
    end = last_closed_boundary()
    start = end - dt.timedelta(seconds=CATCH_UP_PERIODS * conf.get("BILLING_METERING_PERIOD_SECONDS"))
    return usage_record_collect(window_start=start, window_end=end)


@shared_task(name="billing.invoice_run_due_task")
def invoice_run_due_task() -> dict:
    """Finalize last month's invoices (UTC label; each organization only once its own local month has ended, so
    hourly runs on the first days of a month catch every time zone). Beat: hourly."""
    run = invoice_run_execute(period=previous_period(period_of(now(), "UTC")))
    return {"run": str(run.id), "finalized": run.invoices_finalized}


@shared_task(name="billing.invoice_preview_task")
def invoice_preview_task() -> dict:
    """Recompute the drafts of the current month (late records land here while the month is open). Beat: daily."""
    run = invoice_run_execute(period=period_of(now(), "UTC"), finalize=False)
    return {"run": str(run.id), "drafted": run.invoices_drafted}
