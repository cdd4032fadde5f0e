"""Workflow registry: a workflow is an ordered list of named, idempotent steps for one Operation kind.

A step is `fn(op: Operation) -> None`. It runs inside the transaction that holds the Operation's row lock,
may update `op.state` (saved with the step), and must be idempotent: driver calls are keyed by our UUIDs so a
retry finds what the last try made. A step that works through a list in pieces returns `AGAIN`: its transaction
(the piece and `op.state`) commits and the same step runs again, so a crash loses at most the current piece.
A step may raise:
- `StepWait(seconds)`: not done yet (e.g. waiting for a domain to run); run the same step again later;
- `apps.core.drivers.DriverTransientError`: retried with exponential backoff until the deadline;
- `apps.core.drivers.DriverError` or `apps.core.errors.DomainError`: terminal; `on_error` marks the target.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

#: Returned by a step: commit this step's work and `op.state`, then run the same step again.
AGAIN = object()


class StepWait(Exception):
    """The step is not finished; run it again in `seconds`."""

    def __init__(self, seconds: float = 1.0, reason: str = ""):
        super().__init__(reason or f"waiting {seconds}s")
        self.seconds = seconds
        self.reason = reason


@dataclass(frozen=True)
class Workflow:
    kind: str
    steps: tuple[tuple[str, Callable], ...]
    on_error: Callable | None = None  # fn(op, code, detail) inside a transaction
    on_success: Callable | None = None  # fn(op) inside the last step's transaction
    queue: str = "provisioning"
    deadline_seconds: float = 900.0
    max_backoff_seconds: float = 60.0
    names: tuple[str, ...] = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "names", tuple(name for name, _ in self.steps))

    def fn(self, step: str) -> Callable:
        return dict(self.steps)[step]

    def next_step(self, step: str) -> str | None:
        idx = self.names.index(step)
        return self.names[idx + 1] if idx + 1 < len(self.names) else None


_REGISTRY: dict[str, Workflow] = {}


def register(workflow: Workflow) -> Workflow:
    """Register (or replace) the workflow for `workflow.kind`."""
    _REGISTRY[workflow.kind] = workflow
    return workflow


def get(kind: str) -> Workflow:
    return _REGISTRY[kind]
