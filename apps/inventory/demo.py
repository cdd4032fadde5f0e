"""Demo data: the sample fleet (apps/inventory/fleets/sample.yaml), imported idempotently on every `make run`."""
from pathlib import Path

from .fleet.sync import fleet_apply, fleet_plan

SAMPLE = Path(__file__).resolve().parent / "fleets" / "sample.yaml"


def load_demo(stdout) -> None:
    plan = fleet_plan(SAMPLE.read_text())
    if not plan.ok:
        raise RuntimeError("sample fleet invalid: " + "; ".join(map(str, plan.errors)))
    if not plan.changes:
        stdout.write("inventory: sample fleet already loaded\n")
        return
    summary = fleet_apply(plan)
    stdout.write(f"inventory: sample fleet loaded {summary['created']}\n")
