"""Driving operations in tests with the real step runner (Celery is eager, but on_commit never fires in a test
transaction, so tests run the steps themselves)."""
from apps.operations.models import TERMINAL, Operation
from apps.operations.runner import operation_run_step


def drive(op_id, max_steps: int = 60, follow: bool = True) -> Operation:
    """Run the operation's steps with the real runner until it finishes or stops making progress; then (`follow`)
    the operations it started to go on with its work (`state["parent_operation"]`, e.g. a bare-metal host's
    cleaning after a delete), as the worker would run them once enqueued. Returns the operation itself."""
    for _ in range(max_steps):
        op = Operation.objects.get(pk=op_id)
        if op.status in TERMINAL:
            break
        operation_run_step(op_id)
    if follow:
        for child in Operation.objects.filter(state__parent_operation=str(op_id)).exclude(status__in=TERMINAL):
            drive(child.pk, max_steps=max_steps)
    return Operation.objects.get(pk=op_id)
