"""At worker start, resume every unfinished operation (a killed worker's work continues at once)."""
from celery.signals import worker_ready


@worker_ready.connect
def _resume_on_worker_start(sender=None, **kwargs):  # pragma: no cover - exercised by the kill test
    from .runner import operation_resume_stalled

    operation_resume_stalled(older_than_seconds=0)
