from celery import shared_task

from . import runner


@shared_task(name="operations.operation_run_step_task", acks_late=True)
def operation_run_step_task(operation_id: str) -> str | None:
    """Run the current step of one Operation (idempotent; see apps.operations.runner)."""
    return runner.operation_run_step(operation_id)


@shared_task(name="operations.operation_resume_stalled_task")
def operation_resume_stalled_task(older_than_seconds: float = 30.0) -> int:
    return runner.operation_resume_stalled(older_than_seconds=older_than_seconds)
