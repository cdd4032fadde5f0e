"""enqueue_on_commit(): a task is sent only after commit; a rolled-back transaction sends nothing."""
import pytest
from django.db import transaction

from apps.core.tasks import enqueue_on_commit


class RecordingTask:
    def __init__(self):
        self.sent: list[tuple] = []

    def apply_async(self, args=(), kwargs=None, **options):
        self.sent.append((tuple(args), kwargs or {}, options))


@pytest.mark.django_db(transaction=True)
def test_nothing_enqueued_when_transaction_rolls_back():
    task = RecordingTask()
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            enqueue_on_commit(task, "a", queue="provisioning")
            raise RuntimeError("roll back")
    assert task.sent == []


@pytest.mark.django_db(transaction=True)
def test_enqueued_once_after_commit_not_before():
    task = RecordingTask()
    with transaction.atomic():
        enqueue_on_commit(task, "op-1", queue="provisioning", countdown=2)
        assert task.sent == []
    assert task.sent == [(("op-1",), {}, {"queue": "provisioning", "countdown": 2})]


@pytest.mark.django_db(transaction=True)
def test_inner_savepoint_rollback_drops_only_its_tasks():
    task = RecordingTask()
    with transaction.atomic():
        enqueue_on_commit(task, "kept")
        try:
            with transaction.atomic():
                enqueue_on_commit(task, "dropped")
                raise ValueError
        except ValueError:
            pass
    assert [s[0] for s in task.sent] == [("kept",)]
