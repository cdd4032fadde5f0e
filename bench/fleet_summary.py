"""Benchmark: the admin portal's heat map, `GET /api/v1/fleet/summary/`, through the whole API stack (staff token
authentication, the selector, JSON rendering, gzip as the console's browser gets it) on a fleet in PostgreSQL.

Usage: python bench/fleet_summary.py [--hosts 2000] [--requests 20] [--fill 0.5] [--seed 1]

Builds a benchmark-only database (`gpucloud_bench_fleet_summary`, dropped and re-created each run). The fleet is the
one of `bench/placement_latency.py` (HGX H100 hosts, 8 GPUs each, so 2,000 hosts are 16,000 GPUs; some cordoned
or faulty; about `--fill` of the GPUs held), plus a MIG layout (`3g.40gb` ×2) on every tenth host's GPUs and a
dirty GPU on every twentieth host. The last stdout line is one JSON object: hosts, gpus, response bytes (plain and
gzip), SQL queries per request, p50 / p99 / max in ms, the 1-minute load average.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("BENCH_DATABASE_NAME", "gpucloud_bench_fleet_summary")

import placement_latency as fleetbench  # noqa: E402  (sets DATABASE_URL for the bench database)


def build_fleet(n_hosts: int, fill: float, rng: random.Random) -> list:
    """The benchmark fleet (module docstring) in the bench database Django is set up on; returns the host ids.
    `bench/admin_portal.py` loads the same fleet."""
    from apps.inventory.models import Gpu, GpuInstance
    from apps.tenancy.models import Organization, Project

    fleetbench.truncate_fleet()
    host_ids = fleetbench.load_fleet(n_hosts, rng)
    org = Organization.objects.get_or_create(slug="bench", defaults={"name": "bench"})[0]
    project = Project.objects.get_or_create(organization=org, slug="bench", defaults={"name": "bench"})[0]
    fleetbench.prefill(host_ids, fill, rng, project)
    mig_hosts, dirty_hosts = host_ids[::10], host_ids[5::20]
    Gpu.objects.filter(host_id__in=mig_hosts).update(mode="mig")
    GpuInstance.objects.bulk_create([GpuInstance(gpu_id=g, profile_id=9, profile="3g.40gb", start=s, size=4)
                                     for g in Gpu.objects.filter(host_id__in=mig_hosts).values_list("id", flat=True)
                                     for s in (0, 4)], batch_size=10000)
    Gpu.objects.filter(host_id__in=dirty_hosts, index=7).update(scrub_state="dirty")
    return host_ids


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=2000)
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--fill", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    fleetbench.setup_django(reuse=False)

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    from apps.identity.models import User
    from apps.identity.services import api_token_create

    build_fleet(args.hosts, args.fill, rng)
    ops = User.objects.create_user("bench-ops@provider.example", staff_role="operator")
    _row, raw = api_token_create(actor=None, user=ops, name="bench", scope="read", staff=True)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")

    from django.core.signals import request_started
    from django.db import reset_queries

    request_started.disconnect(reset_queries)   # else each request empties the log the capture counts
    with CaptureQueriesContext(connection) as ctx:
        r = client.get("/api/v1/fleet/summary/")
    request_started.connect(reset_queries)
    assert r.status_code == 200, r.content[:500]
    body = r.content
    times = []
    for _ in range(args.requests):
        t = time.perf_counter()
        client.get("/api/v1/fleet/summary/")
        times.append((time.perf_counter() - t) * 1000)
    data = json.loads(body)
    res = {"hosts": data["host_count"], "gpus": data["gpu_count"], "bytes": len(body),
           "bytes_gzip": len(gzip.compress(body, 6)), "queries": len(ctx.captured_queries),
           "requests": len(times), "p50_ms": fleetbench.pct(times, 0.5), "p99_ms": fleetbench.pct(times, 0.99),
           "max_ms": round(max(times), 1), "mean_ms": round(statistics.mean(times), 1),
           "load_1m": round(os.getloadavg()[0], 2)}
    print(f"fleet summary of {res['hosts']} hosts / {res['gpus']} GPUs: {res['bytes']:,} bytes "
          f"({res['bytes_gzip']:,} gzip), {res['queries']} queries, p50 {res['p50_ms']} ms, p99 {res['p99_ms']} ms")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
