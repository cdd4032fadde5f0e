"""Benchmark: launch checks (`POST /instances/check/`, `/clusters/check/`, `/leases/check/`) through the whole API
stack (token authentication, strict body, the create's own steps rolled back, quota lines, price) on a fleet of
1,000 hosts in PostgreSQL.

Usage: python bench/launch_check.py [--hosts 1000] [--requests 300] [--fill 0.5] [--seed 1]

Builds a benchmark-only database (`gpucloud_bench_launch_check`, dropped and re-created each run).

The fleet is the one of `bench/placement_latency.py` (HGX H100 hosts, 8 GPUs, 8 IB rails, 32 hosts per scalable
unit, some cordoned or faulty; about `--fill` of the GPUs held), as hypervisors; a third of the holders have a
known end (so "not now" answers compute `earliest_start` over real candidate instants). A tenant organization
(enterprise plan), its project, flavors (1 and 8 whole GPUs, a MIG `3g.40gb`), an image and a price book exist.
The mix sent, one request at a time, in-process (Django's test client, no network): placeable 1-GPU and MIG
instances, 8-GPU instances, 16-GPU instances (no host has
16: unplaceable), 4-host clusters on one fabric, 8-GPU
leases over a 3-hour window, and a flavor whose GPU quota is exhausted. The console's budget is 500 ms.
The last stdout line is one JSON object: p50_ms / p99_ms over all checks, per kind (with the median number of
SQL queries, a figure the machine's load does not change), the answers' codes and the 1-minute load average.
"""
from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import random
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("BENCH_DATABASE_NAME", "gpucloud_bench_launch_check")

import placement_latency as fleetbench  # noqa: E402  (sets DATABASE_URL for the bench database)

BUDGET_MS = 500


def prepare(args, rng: random.Random) -> dict:
    from django.db import connection
    from rest_framework.test import APIClient

    from apps.billing.services.catalog import price_book_create, price_set
    from apps.compute.models import Flavor, Image
    from apps.core import clock
    from apps.identity.models import User
    from apps.identity.services import api_token_create
    from apps.inventory.models import Host
    from apps.scheduling.placement.topology import topology_cache_clear
    from apps.tenancy.models import Membership, Organization, OrgRole, Project, Quota
    from apps.tenancy.quotas import PLANS

    topology_cache_clear()
    host_ids = fleetbench.load_fleet(args.hosts, rng)
    Host.objects.update(provisioning_kind="hypervisor")
    org = Organization.objects.create(slug="bench", name="Bench", plan="enterprise")
    limits = {**PLANS["enterprise"], "vgpus": 0}   # the vGPU flavor is refused by quota
    Quota.objects.bulk_create([Quota(organization=org, resource=r, limit=v) for r, v in limits.items()])
    project = Project.objects.create(organization=org, slug="bench", name="Bench")
    others = Organization.objects.create(slug="others", name="Others", plan="enterprise")
    fleetbench.prefill(host_ids, args.fill, rng, Project.objects.create(organization=others, slug="o", name="O"))
    now = clock.now()
    with connection.cursor() as cur:
        # a third of the holders end within the next 48 hours
        cur.execute("""UPDATE scheduling_allocation SET period = tstzrange(lower(period), %s + (random() * 48) *
                       interval '1 hour') WHERE consumer_id IN (SELECT id FROM scheduling_consumer WHERE
                       random() < 0.33)""", [now])
        # the free GPUs of every tenth host are in MIG mode
        cur.execute("""UPDATE inventory_gpu SET mode = 'mig' WHERE host_id IN (SELECT id FROM inventory_host
                       WHERE name LIKE '%%0') AND id NOT IN (SELECT gpu_id FROM scheduling_allocation
                       WHERE gpu_id IS NOT NULL)""")
        # ... with 4 SR-IOV VFs each (Hopper hands MIG-backed vGPUs to VMs as VFs)
        cur.execute("""INSERT INTO inventory_virtualfunction (id, created_at, updated_at, gpu_id, index, pci_address,
                       virtual_guid) SELECT gen_random_uuid(), now(), now(), g.id, i, '0000:c0:00.' || (i + 4), '' FROM inventory_gpu g,
                       generate_series(0, 3) i WHERE g.mode = 'mig'""")
    from apps.scheduling.ledger.maintenance import ledger_usage_refresh_all

    ledger_usage_refresh_all()
    with connection.cursor() as cur:
        cur.execute("ANALYZE")
    user = User.objects.create_user("bench@example.com", None)
    Membership.objects.create(user=user, organization=org, role=OrgRole.MEMBER)
    _row, raw = api_token_create(actor=None, user=user, name="bench", scope="write", organization=org)
    image = Image.objects.create(name="ubuntu", os="ubuntu", source_url="https://images.test/u.img",
                                 checksum="sha256:" + "0" * 64)
    flavors = {
        "g1": Flavor.objects.create(name="g1-h100", vcpus=24, memory_mib=131072, gpu_form="gpu",
                                    gpu_model="H100-SXM5-80GB", gpu_count=1),
        "g8": Flavor.objects.create(name="g8-h100", vcpus=192, memory_mib=1048576, gpu_form="gpu",
                                    gpu_model="H100-SXM5-80GB", gpu_count=8),
        "g16": Flavor.objects.create(name="g16-h100", vcpus=32, memory_mib=131072, gpu_form="gpu",
                                     gpu_model="H100-SXM5-80GB", gpu_count=16),
        "mig": Flavor.objects.create(name="mig-3g40", vcpus=8, memory_mib=65536, gpu_form="mig",
                                     gpu_model="H100-SXM5-80GB", mig_profile="3g.40gb"),
        "vgpu": Flavor.objects.create(name="vgpu-l40s", vcpus=8, memory_mib=32768, gpu_form="vgpu",
                                      gpu_model="L40S", vgpu_type="L40S-4Q"),
    }
    from apps.billing.models import SlaTier

    SlaTier.objects.get_or_create(code="standard", defaults={"name": "Standard", "target_uptime_pct": Decimal("99.9"),
                                                             "support_response_minutes": 240})
    book = price_book_create(actor=None, name="bench", currency="USD", effective_from=now - dt.timedelta(days=1))
    for key, price in (("g1", "2.75"), ("g8", "22"), ("mig", "0.9"), ("vgpu", "0.5")):
        price_set(actor=None, book=book, sku=f"flavor:name={flavors[key].name}", sla_tier="standard",
                  pricing_model="on_demand", unit_price=Decimal(price))
    price_set(actor=None, book=book, sku="gpu:model=H100-SXM5-80GB", sla_tier="standard", pricing_model="reserved",
              unit_price=Decimal("2.10"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return {"client": client, "project": str(project.pk), "image": str(image.pk),
            "flavors": {k: str(f.pk) for k, f in flavors.items()}, "now": now}


def requests(world: dict, rng: random.Random):
    """(kind, path, body) of the mix (module doc)."""
    base = {"project": world["project"], "image": world["image"]}
    start = world["now"].replace(minute=0, second=0, microsecond=0) + dt.timedelta(hours=rng.randint(1, 30))
    mix = [
        ("instance_1gpu", "/api/v1/instances/check/", {**base, "name": "vm", "flavor": world["flavors"]["g1"]}),
        ("instance_mig", "/api/v1/instances/check/", {**base, "name": "vm", "flavor": world["flavors"]["mig"]}),
        ("instance_8gpu", "/api/v1/instances/check/", {**base, "name": "vm", "flavor": world["flavors"]["g8"]}),
        ("instance_unplaceable", "/api/v1/instances/check/", {**base, "name": "vm",
                                                              "flavor": world["flavors"]["g16"]}),
        ("instance_quota", "/api/v1/instances/check/", {**base, "name": "vm", "flavor": world["flavors"]["vgpu"]}),
        ("cluster_4x8", "/api/v1/clusters/check/", {**base, "name": "train", "flavor": world["flavors"]["g8"],
                                                    "size": 4}),
        ("lease_8gpu", "/api/v1/leases/check/", {"project": world["project"], "name": "l", "kind": "gpus",
                                                 "gpu_model": "H100-SXM5-80GB", "count": 8,
                                                 "start": start.isoformat(),
                                                 "end": (start + dt.timedelta(hours=3)).isoformat()}),
    ]
    return rng.choice(mix)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return round(s[min(len(s) - 1, int(q * len(s)))], 2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--fill", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    fleetbench.setup_django(False)
    rng = random.Random(args.seed)
    t = time.perf_counter()
    world = prepare(args, rng)
    load_s = round(time.perf_counter() - t, 1)
    for _ in range(12):   # warm caches and the connection
        _kind, path, body = requests(world, rng)
        world["client"].post(path, body, format="json")
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    by_kind: dict = collections.defaultdict(list)
    queries: dict = collections.defaultdict(list)
    codes: collections.Counter = collections.Counter()
    for _ in range(args.requests):
        kind, path, body = requests(world, rng)
        with CaptureQueriesContext(connection) as captured:
            t = time.perf_counter()
            r = world["client"].post(path, body, format="json")
            by_kind[kind].append((time.perf_counter() - t) * 1000)
        queries[kind].append(len(captured))
        if r.status_code != 200:
            raise SystemExit(f"{kind}: {r.status_code} {r.content[:300]!r}")
        answer = r.json()
        codes[f"{kind}:{answer['code'] or ('queued' if answer['queue']['would_queue'] else 'placeable')}"] += 1
    every = [v for vs in by_kind.values() for v in vs]
    kinds = {k: {"n": len(v), "p50_ms": pct(v, 0.5), "p99_ms": pct(v, 0.99), "max_ms": round(max(v), 2),
                 "queries": int(statistics.median(queries[k]))} for k, v in sorted(by_kind.items())}
    for k, v in kinds.items():
        print(k, json.dumps(v))
    print(json.dumps({"hosts": args.hosts, "requests": len(every), "load_s": load_s,
                      "load_average": round(os.getloadavg()[0], 1), "kinds": kinds,
                      "codes": dict(sorted(codes.items())), "mean_ms": round(statistics.mean(every), 2),
                      "p50_ms": pct(every, 0.5), "p99_ms": pct(every, 0.99), "budget_ms": BUDGET_MS}))


if __name__ == "__main__":
    main()
