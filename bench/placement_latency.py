"""Benchmark: one placement + claim (`placement_claim`) on fleets of 1,000 and 10,000 hosts in PostgreSQL.

Usage: python bench/placement_latency.py [--hosts 1000 10000] [--claims 300] [--fill 0.5] [--seed 1]

Builds a benchmark-only database (`gpucloud_bench_ledger`, dropped and re-created each run unless --reuse) with
the project's migrations, bulk-loads HGX H100 hosts (8 GPUs, 2 NUMA nodes, 8 IB rails, 32 hosts per scalable
unit; ~1 % cordoned, ~0.5 % faulty, ~0.1 % of GPUs faulty), pre-fills about `--fill` of the GPUs with
open-ended allocations (bulk insert, then one set-based summary rebuild), then times `--claims` on-demand
requests of 1, 2, 4 or 8 GPUs with vCPUs and memory, each placed and claimed in its own transaction. The hosts are
hypervisors and the requests are VMs' (`provisioning_kind="hypervisor"`, as compute asks), so the device step also
fits each VM's guest NUMA nodes to its GPUs' host nodes (docs/adr/0510).
The last stdout line is one JSON object: per fleet size p50_ms / p99_ms / mean_ms, plus `p50_ms` and `p99_ms`
of the largest fleet.
"""
from __future__ import annotations

import argparse
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
BENCH_DB = os.environ.get("BENCH_DATABASE_NAME", "gpucloud_bench_ledger")
PG = os.environ.get("BENCH_PG", "postgres://127.0.0.1:5432")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")
os.environ["DATABASE_URL"] = f"{PG}/{BENCH_DB}"

HOSTS_PER_SU = 32
RAILS = 8


def create_database(reuse: bool) -> None:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [BENCH_DB]).fetchone()
        if exists and reuse:
            return
        if exists:
            conn.execute(f'DROP DATABASE "{BENCH_DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{BENCH_DB}"')


def setup_django(reuse: bool) -> None:
    create_database(reuse)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def truncate_fleet() -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("TRUNCATE scheduling_allocation, scheduling_consumer, scheduling_hostusage, inventory_hcaport, "
                    "inventory_gpu, inventory_incident, inventory_host, inventory_switch, inventory_scalableunit, "
                    "inventory_fabric, inventory_zone, inventory_region CASCADE")


def load_fleet(n_hosts: int, rng: random.Random) -> list:
    """Bulk-load `n_hosts` HGX hosts with their GPUs and IB ports. Returns the host ids."""
    from apps.inventory.models import Fabric, Gpu, HcaPort, Host, Region, ScalableUnit, Switch, Zone

    region = Region.objects.create(name="bench")
    zones = [Zone.objects.create(region=region, name=f"bench-{z}") for z in "ab"]
    fabric = Fabric.objects.create(name="bench-ib", kind="infiniband", region=region)
    n_su = (n_hosts + HOSTS_PER_SU - 1) // HOSTS_PER_SU
    sus = ScalableUnit.objects.bulk_create(
        [ScalableUnit(zone=zones[i % 2], name=f"su{i}") for i in range(n_su)])
    leaves = Switch.objects.bulk_create(
        [Switch(name=f"su{i}-leaf{r}", fabric=fabric, role="leaf", scalable_unit=sus[i], rail=r)
         for i in range(n_su) for r in range(RAILS)], batch_size=5000)
    hosts = []
    for i in range(n_hosts):
        x = rng.random()
        state = "cordoned" if x < 0.01 else "faulty" if x < 0.015 else "available"
        su = sus[i // HOSTS_PER_SU]
        hosts.append(Host(name=f"gpu{i:05d}", zone=su.zone_id and zones[(i // HOSTS_PER_SU) % 2],
                          scalable_unit=su, serial=f"SN{i:07d}", state=state, cpu_sockets=2, cpu_cores=112,
                          cpu_threads=224, memory_mib=2 * 1024 * 1024, numa_nodes=2,
                          nvswitch_system="hgx-h100-8gpu", provisioning_kind="hypervisor"))
    Host.objects.bulk_create(hosts, batch_size=5000)
    gpus, ports = [], []
    for i, h in enumerate(hosts):
        su_i = i // HOSTS_PER_SU
        for k in range(8):
            gpus.append(Gpu(host=h, index=k, model="H100-SXM5-80GB", uuid=f"GPU-{uuid.UUID(int=i * 8 + k)}",
                            serial=f"G{i:06d}{k}", pci_address=f"0000:{k:02x}:00.0", numa_node=k // 4,
                            health="faulty" if rng.random() < 0.001 else "ok"))
        for r in range(RAILS):
            ports.append(HcaPort(host=h, device=f"mlx5_{r}", port_guid=f"0x{(i * RAILS + r + 1):016x}",
                                 fabric=fabric, rail=r, leaf_switch=leaves[su_i * RAILS + r],
                                 leaf_port=i % HOSTS_PER_SU + 1))
    Gpu.objects.bulk_create(gpus, batch_size=10000)
    HcaPort.objects.bulk_create(ports, batch_size=10000)
    return [h.id for h in hosts]


def prefill(host_ids: list, fill: float, rng: random.Random, project) -> int:
    """Open-ended whole-GPU allocations on about `fill` of the GPUs (each host gets a random count of its
    lowest-indexed GPUs), inserted in bulk; the summary is rebuilt set-based afterwards."""
    from django.db.backends.postgresql.psycopg_any import DateTimeTZRange, NumericRange

    from apps.core import clock
    from apps.inventory.models import Gpu
    from apps.scheduling.ledger.maintenance import ledger_usage_refresh_all
    from apps.scheduling.models import Allocation, Consumer

    now = clock.now()
    gpu_ids = {}
    for hid, gid, idx in Gpu.objects.values_list("host_id", "id", "index"):
        gpu_ids[(hid, idx)] = gid
    consumers, rows = [], []
    for hid in host_ids:
        k = min(8, max(0, int(rng.gauss(fill * 8, 2.5))))
        if not k:
            continue
        c = Consumer(id=uuid.uuid4(), consumer_type="instance", project=project, created_at=now, updated_at=now)
        consumers.append(c)
        for idx in range(k):
            rows.append(Allocation(consumer=c, consumer_type="instance", project=project, host_id=hid,
                                   gpu_id=gpu_ids[(hid, idx)], resource_class="gpu",
                                   slices=NumericRange(0, 8, "[)"), period=DateTimeTZRange(now, None, "[)")))
        rows.append(Allocation(consumer=c, consumer_type="instance", project=project, host_id=hid,
                               resource_class="vcpu", amount=24 * k, period=DateTimeTZRange(now, None, "[)")))
    Consumer.objects.bulk_create(consumers, batch_size=10000)
    Allocation.objects.bulk_create(rows, batch_size=10000)
    ledger_usage_refresh_all()
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("ANALYZE")
    return sum(1 for r in rows if r.resource_class == "gpu")


def time_claims(n: int, rng: random.Random, project) -> list[float]:
    from apps.scheduling.errors import CapacityUnavailable
    from apps.scheduling.ledger import ConsumerRef
    from apps.scheduling.placement import PlacementRequest
    from apps.scheduling.services import placement_claim

    out = []
    for _ in range(n):
        gpus = rng.choice([1, 1, 1, 2, 2, 4, 8])
        req = PlacementRequest(project_id=project.id, gpus_per_host=gpus, vcpus=24 * gpus, memory_mib=131072 * gpus,
                               gpu_models=("H100-SXM5-80GB",), provisioning_kind="hypervisor")
        t = time.perf_counter()
        try:
            placement_claim(actor=None, request=req, consumers=ConsumerRef(uuid.uuid4(), "instance", project.id))
        except CapacityUnavailable:
            pass
        out.append((time.perf_counter() - t) * 1000)
    return out


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return round(s[min(len(s) - 1, int(q * len(s)))], 2)


def run_size(n_hosts: int, args, rng: random.Random) -> dict:
    from apps.tenancy.models import Organization, Project

    truncate_fleet()
    from apps.scheduling.placement.topology import topology_cache_clear

    topology_cache_clear()
    t = time.perf_counter()
    host_ids = load_fleet(n_hosts, rng)
    org = Organization.objects.get_or_create(slug="bench", defaults={"name": "bench"})[0]
    project = Project.objects.get_or_create(organization=org, slug="bench", defaults={"name": "bench"})[0]
    used = prefill(host_ids, args.fill, rng, project)
    load_s = time.perf_counter() - t
    time_claims(10, rng, project)  # warm caches and connections
    lat = time_claims(args.claims, rng, project)
    res = {"hosts": n_hosts, "gpus": n_hosts * 8, "gpus_prefilled": used, "load_s": round(load_s, 1),
           "claims": len(lat), "p50_ms": pct(lat, 0.50), "p99_ms": pct(lat, 0.99),
           "mean_ms": round(statistics.mean(lat), 2), "max_ms": round(max(lat), 2)}
    print(json.dumps(res))
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--claims", type=int, default=300)
    ap.add_argument("--fill", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--reuse", action="store_true")
    args = ap.parse_args()
    setup_django(args.reuse)
    rng = random.Random(args.seed)
    results = {str(n): run_size(n, args, rng) for n in args.hosts}
    big = results[str(max(args.hosts))]
    print(json.dumps({"fleets": results, "p50_ms": big["p50_ms"], "p99_ms": big["p99_ms"],
                      "target": {"p50_ms": 25, "p99_ms": 100}}))


if __name__ == "__main__":
    main()
