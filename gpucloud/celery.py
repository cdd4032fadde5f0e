"""Celery application: queues `default`, `provisioning`, `reconcile`, `billing`, `notifications`.

`notifications` carries only webhook and e-mail delivery (tasks routed there by name), so a tenant's slow or
unreachable receiver occupies only the workers consuming it, never the ones running provisioning.

The beat schedule is collected from the apps: every installed app under `apps.` may define
`BEAT_SCHEDULE` (a dict in Celery's beat format) in its `schedule.py`.

Every message carries a `sent_at` header (Unix seconds at publish), from which /metrics tells the age of the
oldest message of each queue (`gpucloud_celery_queue_oldest_age_seconds`).
"""
import importlib
import os
import time

from celery import Celery
from celery.signals import before_task_publish
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")

app = Celery("gpucloud")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue(name) for name in ("default", "provisioning", "reconcile", "billing",
                                                    "notifications")]
app.conf.task_routes = {"reservations.notification*": {"queue": "notifications"}}
app.autodiscover_tasks()


@before_task_publish.connect
def _stamp_sent_at(headers=None, **kwargs):
    """Stamp the message's publish time (Unix seconds) in its headers; a re-sent message gets a new one."""
    if headers is not None:
        headers["sent_at"] = time.time()


def collect_beat_schedule() -> dict:
    """Merge `BEAT_SCHEDULE` dicts from every `apps.<name>.schedule` module that exists."""
    from django.apps import apps as django_apps

    schedule: dict = {}
    for config in django_apps.get_app_configs():
        if not config.name.startswith("apps."):
            continue
        try:
            module = importlib.import_module(f"{config.name}.schedule")
        except ModuleNotFoundError as exc:
            if exc.name != f"{config.name}.schedule":
                raise
            continue
        schedule.update(getattr(module, "BEAT_SCHEDULE", {}))
    return schedule


@app.on_after_finalize.connect
def _install_beat_schedule(sender, **kwargs):  # pragma: no cover - wiring
    sender.conf.beat_schedule = collect_beat_schedule()
