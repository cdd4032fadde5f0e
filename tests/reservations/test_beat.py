"""Celery beat drives lease starts/ends, queue processing and notification delivery: the schedule is collected
from apps/reservations/schedule.py and names registered tasks that run end to end."""
import pytest

from gpucloud.celery import app, collect_beat_schedule

from .conftest import at, gpu_host, lease


def test_schedule_names_registered_tasks():
    schedule = collect_beat_schedule()
    ours = {k: v for k, v in schedule.items() if k.startswith("reservations-")}
    assert {v["task"] for v in ours.values()} == {"reservations.leases_advance_task", "reservations.queue_process_task",
                                                  "reservations.notifications_deliver_task"}
    app.loader.import_default_modules()
    for v in ours.values():
        assert v["task"] in app.tasks


@pytest.mark.django_db
def test_tasks_run(world, clock):
    from apps.reservations.tasks import leases_advance_task, notifications_deliver_task, queue_process_task

    gpu_host()
    le = lease(world.project_a, start=at(9), end=at(12))
    clock.move_to(at(9))
    assert leases_advance_task.apply().get()["activated"] == 1
    assert queue_process_task.apply().get() == {"placed": 0, "expired": 0, "waiting": 0}
    assert notifications_deliver_task.apply().get() == 0
    le.refresh_from_db()
    assert le.status == "active"
