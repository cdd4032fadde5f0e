"""Benchmark: our placement beside OpenStack Placement (standalone) on the same hosts, in the same run.

Usage: python bench/compare_openstack_placement.py [--hosts 1000 10000] [--requests 40] [--venv /tmp/...]

OpenStack Placement is installed into a throwaway virtual
environment under the system temp directory (`pip install openstack-placement gunicorn psycopg2-binary`; skipped
when `--venv` already has it), uses its own PostgreSQL database on 127.0.0.1 (`placement_bench_ledger`), and runs
under gunicorn (2 workers x 4 threads, noauth2) on 127.0.0.1. For each fleet size the same hosts are loaded
into both systems: ours through `bench/placement_latency.py` (HGX H100 hosts, 8 GPUs each, about half the GPUs
pre-allocated), Placement as root resource providers with VCPU, MEMORY_MB and PGPU inventories (bulk SQL into
its database, the fastest means that works) and the same per-host PGPU usage as allocations.

Timed, alternating: `GET /allocation_candidates?resources=PGPU:1&limit=50` against our `place()` for a 1-GPU
request with limit 50 (both read-only: candidates, no claim), plus our placement+claim. Last stdout line: one
JSON object with `ours_p50_ms`, `ours_p99_ms`, `placement_p50_ms`, `speedup` (placement_p50 / ours_p50) for the
largest fleet, and every size under `fleets`.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("BENCH_DATABASE_NAME", "gpucloud_bench_compare")

import placement_latency as pl  # noqa: E402  (sets DATABASE_URL before Django starts)

OSP_DB = "placement_bench_ledger"
PORT = int(os.environ.get("BENCH_PLACEMENT_PORT", "18778"))
HEADERS = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39", "Accept": "application/json"}


def ensure_venv(venv: Path) -> None:
    if (venv / "bin" / "placement-manage").exists():
        return
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "openstack-placement", "gunicorn",
                    "psycopg2-binary"], check=True)


def start_placement(venv: Path, workdir: Path) -> subprocess.Popen:
    import psycopg

    with psycopg.connect(f"{pl.PG}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{OSP_DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{OSP_DB}"')
    pg = pl.PG.replace("postgres://", "")
    (workdir / "placement.conf").write_text(
        "[DEFAULT]\ndebug = false\n[api]\nauth_strategy = noauth2\n[placement_database]\n"
        f"connection = postgresql+psycopg2://root@{pg}/{OSP_DB}\n")
    subprocess.run([str(venv / "bin" / "placement-manage"), "--config-file", str(workdir / "placement.conf"),
                    "db", "sync"], check=True, capture_output=True)
    env = {**os.environ, "OS_PLACEMENT_CONFIG_DIR": str(workdir)}
    proc = subprocess.Popen([str(venv / "bin" / "gunicorn"), "-b", f"127.0.0.1:{PORT}", "-w", "2", "--threads", "4",
                             "-k", "gthread", "--timeout", "300", "placement.wsgi.api:application"],
                            env=env, stdout=subprocess.DEVNULL, stderr=open(workdir / "gunicorn.log", "w"))
    for _ in range(120):
        try:
            get("/")
            return proc
        except OSError:
            time.sleep(0.5)
    raise RuntimeError("placement did not start; see gunicorn.log")


def get(path: str) -> bytes:
    req = urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", headers=HEADERS)
    with urllib.request.urlopen(req, timeout=300) as r:
        return r.read()


def put(path: str, body: dict) -> None:
    req = urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", data=json.dumps(body).encode(), method="PUT",
                                 headers={**HEADERS, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        r.read()


def load_placement(usage: dict[str, tuple[int, int]]) -> None:
    """Root providers with VCPU / MEMORY_MB / PGPU inventories and one consumer per used host, in bulk SQL.

    `usage`: host name -> (PGPUs used, vCPUs used). Resource class ids come from Placement's own table (it syncs
    the standard classes on its first request)."""
    import psycopg

    with psycopg.connect(f"{pl.PG}/{OSP_DB}", autocommit=True) as conn:
        conn.execute("TRUNCATE allocations, consumers, inventories, resource_providers, projects, users "
                     "RESTART IDENTITY CASCADE")
        rc = dict(conn.execute("SELECT name, id FROM resource_classes WHERE name IN "
                               "('VCPU', 'MEMORY_MB', 'PGPU')").fetchall())
        if len(rc) < 3:
            import_path = subprocess.run(  # the standard classes are ids = their index in os-resource-classes
                [str(ARGS.venv / "bin" / "python"), "-c",
                 "import os_resource_classes as o, json; print(json.dumps({n: o.STANDARDS.index(n) for n in "
                 "('VCPU', 'MEMORY_MB', 'PGPU')}))"], capture_output=True, text=True, check=True)
            rc = json.loads(import_path.stdout)
        names = sorted(usage)
        with conn.cursor() as cur:
            with cur.copy("COPY resource_providers (id, uuid, name, generation, root_provider_id, created_at) "
                          "FROM STDIN") as cp:
                for i, n in enumerate(names, start=1):
                    cp.write_row((i, str(uuid.uuid5(uuid.NAMESPACE_DNS, n)), n, 1, i, "2026-01-01"))
            with cur.copy("COPY inventories (resource_provider_id, resource_class_id, total, reserved, min_unit, "
                          "max_unit, step_size, allocation_ratio, created_at) FROM STDIN") as cp:
                for i, _ in enumerate(names, start=1):
                    cp.write_row((i, rc["VCPU"], 224, 0, 1, 224, 1, 1.0, "2026-01-01"))
                    cp.write_row((i, rc["MEMORY_MB"], 2097152, 0, 1, 2097152, 1, 1.0, "2026-01-01"))
                    cp.write_row((i, rc["PGPU"], 8, 0, 1, 8, 1, 1.0, "2026-01-01"))
            cur.execute("INSERT INTO projects (id, external_id, created_at) VALUES (1, 'bench', now())")
            cur.execute("INSERT INTO users (id, external_id, created_at) VALUES (1, 'bench', now())")
            with cur.copy("COPY consumers (uuid, project_id, user_id, generation, created_at) FROM STDIN") as cp:
                for n in names:
                    if usage[n][0]:
                        cp.write_row((str(uuid.uuid5(uuid.NAMESPACE_URL, n)), 1, 1, 1, "2026-01-01"))
            with cur.copy("COPY allocations (resource_provider_id, consumer_id, resource_class_id, used, "
                          "created_at) FROM STDIN") as cp:
                for i, n in enumerate(names, start=1):
                    gpus, vcpus = usage[n]
                    if gpus:
                        cid = str(uuid.uuid5(uuid.NAMESPACE_URL, n))
                        cp.write_row((i, cid, rc["PGPU"], gpus, "2026-01-01"))
                        cp.write_row((i, cid, rc["VCPU"], vcpus, "2026-01-01"))
            cur.execute("SELECT setval('resource_providers_id_seq', %s)", [len(names) + 1])
        conn.execute("ANALYZE")


def our_usage() -> dict[str, tuple[int, int]]:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("""SELECT h.name, count(a.id) FILTER (WHERE a.resource_class = 'gpu'),
                              coalesce(sum(a.amount) FILTER (WHERE a.resource_class = 'vcpu'), 0)
                       FROM inventory_host h LEFT JOIN scheduling_allocation a ON a.host_id = h.id
                       WHERE h.state = 'available' GROUP BY h.name""")
        return {n: (int(g), int(v)) for n, g, v in cur.fetchall()}


def pct(values, q):
    s = sorted(values)
    return round(s[min(len(s) - 1, int(q * len(s)))], 2)


def run_size(n_hosts: int, requests: int, rng: random.Random) -> dict:
    from apps.scheduling.ledger import ConsumerRef
    from apps.scheduling.placement import PlacementRequest, place
    from apps.scheduling.placement.topology import topology_cache_clear
    from apps.scheduling.services import placement_claim
    from apps.tenancy.models import Organization, Project

    pl.truncate_fleet()
    topology_cache_clear()
    ids = pl.load_fleet(n_hosts, rng)
    org = Organization.objects.get_or_create(slug="bench", defaults={"name": "bench"})[0]
    project = Project.objects.get_or_create(organization=org, slug="bench", defaults={"name": "bench"})[0]
    pl.prefill(ids, 0.5, rng, project)
    load_placement(our_usage())
    req = PlacementRequest(project_id=project.id, gpus_per_host=1)
    body = json.loads(get("/allocation_candidates?resources=PGPU:1&limit=50"))  # warm both
    n_osp = len(body["allocation_requests"])
    n_ours = len(place(req, limit=50).candidates)
    ours, osp, claims = [], [], []
    for _ in range(requests):
        t = time.perf_counter()
        get("/allocation_candidates?resources=PGPU:1&limit=50")
        osp.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        place(req, limit=50)
        ours.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        placement_claim(actor=None, request=req, consumers=ConsumerRef(uuid.uuid4(), "instance", project.id))
        claims.append((time.perf_counter() - t) * 1000)
    res = {"hosts": n_hosts, "placement_candidates": n_osp, "ours_candidates": n_ours,
           "placement_p50_ms": pct(osp, 0.5), "placement_p99_ms": pct(osp, 0.99),
           "ours_p50_ms": pct(ours, 0.5), "ours_p99_ms": pct(ours, 0.99),
           "ours_claim_p50_ms": pct(claims, 0.5), "ours_claim_p99_ms": pct(claims, 0.99)}
    res["speedup"] = round(res["placement_p50_ms"] / res["ours_p50_ms"], 1)
    print(json.dumps(res))
    return res


ARGS = None


def main() -> None:
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "gpucloud-osp-venv")
    ARGS = ap.parse_args()
    ensure_venv(ARGS.venv)
    pl.setup_django(reuse=False)
    with tempfile.TemporaryDirectory() as wd:
        proc = start_placement(ARGS.venv, Path(wd))
        try:
            rng = random.Random(3)
            results = {str(n): run_size(n, ARGS.requests, rng) for n in ARGS.hosts}
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    big = results[str(max(ARGS.hosts))]
    print(json.dumps({"fleets": results, "ours_p50_ms": big["ours_p50_ms"], "ours_p99_ms": big["ours_p99_ms"],
                      "placement_p50_ms": big["placement_p50_ms"], "speedup": big["speedup"],
                      "ours_claim_p50_ms": big["ours_claim_p50_ms"]}))


if __name__ == "__main__":
    main()
