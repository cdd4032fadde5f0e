"""Driving operations in tests with the real step runner (Celery is eager, but on_commit never fires in a test
transaction, so tests run the steps themselves)."""
from apps.operations.models import TERMINAL, Operation
from apps.operations.runner import operation_run_step


def drive(op_id, max_steps: int = 60) -> Operation:
    """Run the operation's steps with the real runner until it finishes or stops making progress."""
    for _ in range(max_steps):
        op = Operation.objects.get(pk=op_id)
        if op.status in TERMINAL:
            return op
        operation_run_step(op_id)
    return Operation.objects.get(pk=op_id)
