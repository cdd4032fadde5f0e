"""A test workflow whose steps log every execution to a file; step `two` waits for a go-file.

Imported by the test and by the Celery worker it starts (`--include tests.operations.killable`).
"""
import os
import time
from pathlib import Path

from apps.operations import workflows


def _log(line: str) -> None:
    with open(os.environ["GPUCLOUD_TEST_STEP_LOG"], "a") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def step_one(op):
    _log("one")
    op.state["one"] = True


def step_two(op):
    _log("two:start")
    go = Path(os.environ["GPUCLOUD_TEST_GO_FILE"])
    deadline = time.monotonic() + 60
    while not go.exists():
        if time.monotonic() > deadline:
            raise workflows.StepWait(1.0, "go file missing")
        time.sleep(0.1)
    _log("two:done")
    op.state["two"] = True


def step_three(op):
    _log("three")
    op.state["three"] = True


workflows.register(workflows.Workflow(
    kind="test.killable",
    steps=(("one", step_one), ("two", step_two), ("three", step_three)),
    queue="provisioning",
))
