"""Beat schedule of the billing app (collected by gpucloud/celery.py)."""
from celery.schedules import crontab

BEAT_SCHEDULE = {
    "billing-usage-collect": {"task": "billing.usage_record_collect_task", "schedule": crontab(minute=5),
                              "options": {"queue": "billing"}},
    "billing-invoice-run-due": {"task": "billing.invoice_run_due_task", "schedule": crontab(minute=20),
                                "options": {"queue": "billing"}},
    "billing-invoice-preview": {"task": "billing.invoice_preview_task", "schedule": crontab(minute=40, hour=2),
                                "options": {"queue": "billing"}},
}
