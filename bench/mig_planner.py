"""Benchmark: MIG plans per second for random requests on H100-SXM5-80GB and H200-SXM-141GB.

Usage: python bench/mig_planner.py [--seconds 2] [--seed 1]. Each request is 1-7 random profiles, planned on an
empty GPU or next to a random valid current layout. Last stdout line is one JSON object (`plans_per_s`).
"""
import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")

from apps.inventory.catalog import gpu_model_get  # noqa: E402
from apps.inventory.mig import mig_plan  # noqa: E402


def run(key: str, seconds: float, rng: random.Random) -> dict:
    spec = gpu_model_get(key).mig
    ids = [p.id for p in spec.profiles]
    plans = accepted = 0
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        current = ()
        if rng.random() < 0.5:
            base = mig_plan(spec, rng.choices(ids, k=rng.randint(1, 3)))
            current = base.layout if base.ok else ()
        plan = mig_plan(spec, rng.choices(ids, k=rng.randint(1, 7)), current=current)
        plans += 1
        accepted += plan.ok
    elapsed = time.perf_counter() - start
    return {"model": key, "plans": plans, "accepted": accepted, "plans_per_s": round(plans / elapsed, 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0, help="per model")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    results = [run(key, args.seconds, rng) for key in ("H100-SXM5-80GB", "H200-SXM-141GB")]
    for r in results:
        print(f"{r['model']}: {r['plans_per_s']} plans/s ({r['accepted']}/{r['plans']} accepted)")
    total = sum(r["plans"] for r in results) / sum(r["plans"] / r["plans_per_s"] for r in results)
    print(json.dumps({"plans_per_s": round(total, 1), "by_model": {r["model"]: r["plans_per_s"] for r in results}}))


if __name__ == "__main__":
    main()
