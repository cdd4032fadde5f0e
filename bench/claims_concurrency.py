"""Benchmark: concurrent claims against the PostgreSQL ledger.

Usage: python bench/claims_concurrency.py [--procs 8] [--seconds 60] [--hosts 40] [--racers 50]

Phase 1: `--procs` processes (each its own connection) claim and release at random for `--seconds` on a small
fleet (so they collide often): on-demand whole GPUs, MIG slices, leases over random future windows, instances
nested in those leases, and spot work, placed by `placement_claim` or claimed on a random GPU directly.
Afterwards one SQL query counts overlapping slice allocations that the model forbids (holders vs holders,
workloads vs workloads, children outside their parent) and countable rows over capacity.
Phase 2: `--racers` processes claim the last free GPU at the same instant (a barrier); exactly one must win and
the others get `capacity_unavailable`.
Last stdout line: one JSON object with `overlaps`, `claims_per_s`, `releases_per_s`, `last_gpu_winners`,
`last_gpu_capacity_unavailable`.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("BENCH_DATABASE_NAME", "gpucloud_bench_claims")

import placement_latency as pl  # noqa: E402  (sets DATABASE_URL before Django starts)

OVERLAPS_SQL = """
SELECT
 (SELECT count(*) FROM scheduling_allocation a JOIN scheduling_allocation b
    ON a.id < b.id AND a.gpu_id = b.gpu_id AND a.slices && b.slices AND a.period && b.period
   WHERE a.parent_id IS NULL AND NOT a.spot AND b.parent_id IS NULL AND NOT b.spot)
+(SELECT count(*) FROM scheduling_allocation a JOIN scheduling_allocation b
    ON a.id < b.id AND a.gpu_id = b.gpu_id AND a.slices && b.slices AND a.period && b.period
   WHERE a.consumer_type <> 'lease' AND b.consumer_type <> 'lease')
+(SELECT count(*) FROM scheduling_allocation c JOIN scheduling_allocation p ON p.id = c.parent_id
   WHERE NOT (p.period @> c.period) OR (c.slices IS NOT NULL AND NOT (p.slices @> c.slices)))
"""
OVER_CAPACITY_SQL = """
WITH pts AS (SELECT a.host_id, a.resource_class, lower(a.period) AS t FROM scheduling_allocation a
             WHERE a.resource_class IN ('vcpu', 'memory_mib'))
SELECT count(*) FROM (
  SELECT p.host_id, p.resource_class, p.t,
    (SELECT sum(x.amount) FROM scheduling_allocation x WHERE x.host_id = p.host_id
       AND x.resource_class = p.resource_class AND x.period @> p.t AND x.consumer_type <> 'lease') AS used
  FROM pts p) s JOIN inventory_host h ON h.id = s.host_id
WHERE (s.resource_class = 'vcpu' AND s.used > h.cpu_threads) OR (s.resource_class = 'memory_mib' AND s.used > h.memory_mib)
"""


def _django():
    import django

    django.setup()


def _project():
    from apps.tenancy.models import Project

    return Project.objects.get(slug="bench")


def worker(seed: int, seconds: float, out: mp.Queue) -> None:
    _django()
    import datetime as dt

    from django.db import connection

    from apps.core import clock
    from apps.inventory.models import Gpu
    from apps.scheduling.errors import CapacityUnavailable, ConsumerGenerationConflict
    from apps.scheduling.ledger import AllocationSpec, ConsumerRef, allocations_claim, allocations_release
    from apps.scheduling.placement import PlacementRequest
    from apps.scheduling.services import placement_claim

    rng = random.Random(seed)
    p = _project()
    gpus = list(Gpu.objects.values_list("host_id", "id", "mode"))
    mine: list[uuid.UUID] = []
    leases: list[tuple[uuid.UUID, dt.datetime, dt.datetime]] = []
    claims = releases = refused = 0
    started = time.time()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            x = rng.random()
            cid = uuid.uuid4()
            if x < 0.35 and mine:
                releases += bool(allocations_release(consumer_id=mine.pop(rng.randrange(len(mine)))))
                continue
            now = clock.now()
            if x < 0.55:
                n = rng.choice([1, 1, 2, 4, 8])
                placement_claim(actor=None, request=PlacementRequest(project_id=p.id, gpus_per_host=n, vcpus=8 * n,
                                                                     memory_mib=65536 * n),
                                consumers=ConsumerRef(cid, "instance", p.id))
            elif x < 0.65:
                start = now + dt.timedelta(minutes=rng.randint(1, 600))
                end = start + dt.timedelta(minutes=rng.randint(10, 600))
                placement_claim(actor=None, request=PlacementRequest(
                    project_id=p.id, gpus_per_host=rng.choice([2, 4, 8]), consumer_type="lease", start=start,
                    end=end, vcpus=32), consumers=ConsumerRef(cid, "lease", p.id))
                leases.append((cid, start, end))
            elif x < 0.75 and leases:
                lid, start, end = rng.choice(leases)
                placement_claim(actor=None, request=PlacementRequest(
                    project_id=p.id, gpus_per_host=1, lease_id=lid, start=start, end=end, vcpus=4),
                    consumers=ConsumerRef(cid, "instance", p.id))
            elif x < 0.85:
                placement_claim(actor=None, request=PlacementRequest(project_id=p.id, gpus_per_host=1, spot=True),
                                consumers=ConsumerRef(cid, "instance", p.id))
            else:  # a direct claim on a random GPU (a forced destination): only the constraints protect it
                host, gpu, mode = rng.choice(gpus)
                if mode == "mig":
                    size = rng.choice([1, 2, 4])
                    start_slice = rng.choice(range(0, 8, size))
                    spec = AllocationSpec(host, "mig", gpu_id=gpu, slices=(start_slice, start_slice + size),
                                          profile=f"bench-{size}")
                else:
                    spec = AllocationSpec(host, "gpu", gpu_id=gpu)
                allocations_claim(consumer=ConsumerRef(cid, "instance", p.id),
                                  specs=[spec, AllocationSpec(host, "vcpu", amount=rng.choice([8, 64, 128]))])
            mine.append(cid)
            claims += 1
        except (CapacityUnavailable, ConsumerGenerationConflict):
            refused += 1
    connection.close()
    out.put({"claims": claims, "releases": releases, "refused": refused, "start": started, "end": time.time()})


def racer(barrier, out: mp.Queue) -> None:
    _django()
    from django.db import connection

    from apps.scheduling.errors import CapacityUnavailable
    from apps.scheduling.ledger import ConsumerRef
    from apps.scheduling.placement import PlacementRequest
    from apps.scheduling.services import placement_claim

    p = _project()
    req = PlacementRequest(project_id=p.id, gpus_per_host=1, gpu_models=("A100-SXM4-80GB",))
    connection.ensure_connection()
    barrier.wait()
    try:
        placement_claim(actor=None, request=req, consumers=ConsumerRef(uuid.uuid4(), "instance", p.id))
        out.put("won")
    except CapacityUnavailable as exc:
        out.put(exc.code)
    connection.close()


def build(n_hosts: int) -> None:
    from apps.inventory.models import Gpu, Host
    from apps.tenancy.models import Organization, Project

    pl.truncate_fleet()
    ids = pl.load_fleet(n_hosts, random.Random(7))
    Gpu.objects.filter(host_id__in=ids[: n_hosts // 4]).update(mode="mig")
    # the race target: one A100 host whose GPUs are all taken but one
    last = Host.objects.get(id=ids[-1])
    Gpu.objects.filter(host=last).update(model="A100-SXM4-80GB")
    Host.objects.filter(id=last.id).update(state="available", nvswitch_system="")
    org = Organization.objects.get_or_create(slug="bench", defaults={"name": "bench"})[0]
    Project.objects.get_or_create(organization=org, slug="bench", defaults={"name": "bench"})
    from apps.scheduling.ledger.maintenance import ledger_usage_refresh_all

    ledger_usage_refresh_all()


def fill_race_host() -> None:
    from apps.inventory.models import Gpu
    from apps.scheduling.ledger import AllocationSpec, ConsumerRef, allocations_claim, allocations_release
    from apps.scheduling.models import Allocation

    p = _project()
    a100 = list(Gpu.objects.filter(model="A100-SXM4-80GB").order_by("index"))
    holders = Allocation.objects.filter(gpu__in=a100).values_list("consumer_id", flat=True).distinct()
    for cid in list(holders):
        allocations_release(consumer_id=cid)
    for g in a100[1:]:
        allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", p.id),
                          specs=[AllocationSpec(g.host_id, "gpu", gpu_id=g.id)])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--hosts", type=int, default=40)
    ap.add_argument("--racers", type=int, default=50)
    args = ap.parse_args()
    pl.setup_django(reuse=False)
    build(args.hosts)
    from django.db import connection, connections

    connections.close_all()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(i, args.seconds, out)) for i in range(args.procs)]
    for pr in procs:
        pr.start()
    stats = [out.get() for _ in procs]
    for pr in procs:
        pr.join()
    # the window in which workers ran (process start-up excluded)
    elapsed = max(s["end"] for s in stats) - min(s["start"] for s in stats)
    with connection.cursor() as cur:
        cur.execute(OVERLAPS_SQL)
        overlaps = cur.fetchone()[0]
        cur.execute(OVER_CAPACITY_SQL)
        over_capacity = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM scheduling_allocation")
        rows = cur.fetchone()[0]
    claims = sum(s["claims"] for s in stats)
    releases = sum(s["releases"] for s in stats)
    refused = sum(s["refused"] for s in stats)
    print(json.dumps({"phase": "random", "procs": args.procs, "seconds": round(elapsed, 1), "claims": claims,
                      "releases": releases, "refused": refused, "rows": rows, "overlaps": overlaps,
                      "over_capacity": over_capacity}))
    fill_race_host()
    connections.close_all()
    barrier = ctx.Barrier(args.racers)
    racers = [ctx.Process(target=racer, args=(barrier, out)) for _ in range(args.racers)]
    for r in racers:
        r.start()
    results = [out.get() for _ in racers]
    for r in racers:
        r.join()
    winners = results.count("won")
    unavailable = results.count("capacity_unavailable")
    print(json.dumps({"phase": "last_gpu", "racers": args.racers, "winners": winners,
                      "capacity_unavailable": unavailable}))
    print(json.dumps({"overlaps": overlaps, "over_capacity": over_capacity,
                      "claims_per_s": round(claims / elapsed, 1), "releases_per_s": round(releases / elapsed, 1),
                      "refused": refused, "last_gpu_winners": winners,
                      "last_gpu_capacity_unavailable": unavailable}))


if __name__ == "__main__":
    main()
