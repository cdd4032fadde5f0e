"""Benchmark: lease-confirmation latency with 10,000 existing leases on a 2,000-host fleet (PostgreSQL).

Usage: python bench/lease_calendar.py [--hosts 2000] [--leases 10000] [--confirms 200] [--fill 0.3] [--seed 1]

Builds a benchmark-only database (`gpucloud_bench_leases`, dropped and re-created each run unless --reuse) with the
project's migrations and the HGX fleet of `bench/placement_latency.py` (8 GPUs per host, 8 IB rails, 32 hosts per
scalable unit, a few cordoned/faulty hosts and faulty GPUs). It bulk-loads `--leases` confirmed leases (whole
hosts or 1-4 GPUs, windows of 4 h to 3 days over the next 90 days, non-overlapping per GPU) as lease rows plus
their ledger allocations, and open-ended on-demand work on about 60 % of the GPUs of `--fill` of the hosts (the others carry the leases). It then times
`--confirms` calls of `lease_create` (validation, quota, request + confirm transactions, placement over the
window (the window fast path of docs/adr/0403-window-fast-path.md), ledger claim, audit and outbox), each for a random window and size (1, 2, 4 or 8 GPUs,
or one whole host). Refusals are timed too (they run the full explanation). The last stdout line is one JSON
object with `confirm_p50_ms`, `confirm_p99_ms`, counts and the load time.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("BENCH_DATABASE_NAME", "gpucloud_bench_leases")

import placement_latency as pl  # noqa: E402  (fleet loader and database helpers of the placement benchmark)

DAY = dt.timedelta(days=1)


def load_leases(n: int, host_ids: list, project, rng: random.Random, now: dt.datetime) -> int:
    """`n` confirmed leases in bulk: per host a sequence of windows with gaps; each lease takes the whole host
    (one in three) or 1-4 of its GPUs."""
    from django.db.backends.postgresql.psycopg_any import DateTimeTZRange, NumericRange

    from apps.inventory.models import Gpu
    from apps.reservations.models import Lease
    from apps.scheduling.models import Allocation, Consumer

    gpus: dict = {}
    for hid, gid, idx in Gpu.objects.values_list("host_id", "id", "index"):
        gpus.setdefault(hid, {})[idx] = gid
    leases, consumers, rows = [], [], []
    cursor = {h: now + dt.timedelta(hours=rng.uniform(1, 48)) for h in host_ids}
    i = 0
    while len(leases) < n:
        hid = host_ids[i % len(host_ids)]
        i += 1
        start = cursor[hid]
        end = start + dt.timedelta(hours=rng.uniform(4, 72))
        cursor[hid] = end + dt.timedelta(hours=rng.uniform(0, 24))
        if end > now + 90 * DAY:
            continue
        whole = rng.random() < 1 / 3
        k = 8 if whole else rng.choice([1, 2, 4])
        pk = uuid.uuid4()
        leases.append(Lease(id=pk, project=project, name=f"bench-{len(leases)}", status="confirmed", start=start,
                            end=end, kind="hosts" if whole else "gpus", gpu_model="H100-SXM5-80GB",
                            count=1 if whole else k, confirmed_at=now))
        consumers.append(Consumer(id=pk, consumer_type="lease", project=project, created_at=now, updated_at=now))
        period = DateTimeTZRange(start, end, "[)")
        rows += [Allocation(consumer_id=pk, consumer_type="lease", project=project, host_id=hid,
                            gpu_id=gpus[hid][7 - j], resource_class="gpu", slices=NumericRange(0, 8, "[)"),
                            period=period) for j in range(k)]
    Lease.objects.bulk_create(leases, batch_size=5000)
    Consumer.objects.bulk_create(consumers, batch_size=5000)
    Allocation.objects.bulk_create(rows, batch_size=10000)
    return len(rows)


def time_confirms(n: int, rng: random.Random, project, now: dt.datetime) -> tuple[list[float], dict]:
    from apps.reservations.services.leases import lease_create
    from apps.scheduling.errors import CapacityUnavailable

    out, counts = [], {"confirmed": 0, "rejected": 0}
    for i in range(n):
        start = (now + dt.timedelta(hours=rng.uniform(2, 24 * 89))).replace(second=0, microsecond=0)
        end = start + dt.timedelta(hours=rng.uniform(2, 48))
        kind, count = rng.choice([("gpus", 1), ("gpus", 2), ("gpus", 4), ("gpus", 8), ("hosts", 1)])
        t = time.perf_counter()
        try:
            lease_create(actor=None, project=project, name=f"new-{i}", start=start, end=end, kind=kind,
                         gpu_model="H100-SXM5-80GB", count=count)
            counts["confirmed"] += 1
        except CapacityUnavailable:
            counts["rejected"] += 1
        out.append((time.perf_counter() - t) * 1000)
    return out, counts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=2000)
    ap.add_argument("--leases", type=int, default=10000)
    ap.add_argument("--confirms", type=int, default=200)
    ap.add_argument("--fill", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--reuse", action="store_true")
    args = ap.parse_args()
    pl.setup_django(args.reuse)
    from django.db import connection

    from apps.core import clock
    from apps.reservations.models import Lease
    from apps.scheduling.ledger.maintenance import ledger_usage_refresh_all
    from apps.scheduling.placement.topology import topology_cache_clear
    from apps.tenancy.models import Organization, Project, Quota

    rng = random.Random(args.seed)
    now = clock.now()
    with connection.cursor() as cur:
        cur.execute("TRUNCATE reservations_lease, audit_auditevent, reservations_notification CASCADE")
    pl.truncate_fleet()
    topology_cache_clear()
    t = time.perf_counter()
    host_ids = pl.load_fleet(args.hosts, rng)
    org = Organization.objects.get_or_create(slug="bench", defaults={"name": "bench"})[0]
    project = Project.objects.get_or_create(organization=org, slug="bench", defaults={"name": "bench"})[0]
    Quota.objects.update_or_create(organization=org, project=None, resource="leases", defaults={"limit": 10 ** 6})
    rng.shuffle(host_ids)
    split = int(len(host_ids) * args.fill)  # on-demand hosts (open-ended work, about 60 % of their GPUs)
    used = pl.prefill(host_ids[:split], 0.6, rng, project)
    rows = load_leases(args.leases, host_ids[split:], project, rng, now)
    ledger_usage_refresh_all()
    with connection.cursor() as cur:
        cur.execute("ANALYZE")
    load_s = time.perf_counter() - t
    time_confirms(5, rng, project, now)  # warm caches and connections
    lat, counts = time_confirms(args.confirms, rng, project, now)
    res = {"hosts": args.hosts, "existing_leases": Lease.objects.filter(name__startswith="bench-").count(),
           "lease_allocation_rows": rows, "on_demand_gpus": used, "load_s": round(load_s, 1),
           "confirms": len(lat), **counts, "confirm_p50_ms": pl.pct(lat, 0.50), "confirm_p99_ms": pl.pct(lat, 0.99),
           "confirm_mean_ms": round(statistics.mean(lat), 2), "confirm_max_ms": round(max(lat), 2)}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
