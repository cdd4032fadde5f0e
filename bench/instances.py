"""Instance benchmark: create and delete N instances (default 100) through the API and a Celery worker on
libvirt's test driver; prints API latency and create→active time.

Usage:
  .venv/bin/python bench/instances.py [--count 100] [--concurrency 4]

It uses its own database (`gpucloud_bench_compute` on 127.0.0.1, dropped and re-created each run; override with
BENCH_DATABASE_URL) and Redis db 7 (override with REDIS_URL). It builds 13 hypervisors of 8 H100 GPUs each, all
on `test:///default` (no NVSwitch partition, so no agent step before start), a 1-GPU flavor and an image, starts
`gunicorn` (2 workers x 2 threads) and one Celery worker (`--pool threads`, `--concurrency` threads, queue
`provisioning`) whose process holds the test driver's state, and answers the node agent's commands (the GPU reset
on delete) in a thread of this process through the same service a real agent's report reaches
(`agent_command_report`), immediately and successfully.

Figures: `api_*` are client-side wall-clock latencies of every POST /instances and DELETE /instances/{id}
(keep-alive session); `create_to_active_*` is `launched_at - created_at` of each instance (database timestamps).
The last stdout line is JSON: {"count", "api_p50_ms", "api_p99_ms", "create_p50_ms", "create_p99_ms",
"delete_p50_ms", "delete_p99_ms", "create_to_active_p50_s", "create_to_active_p99_s", "all_active_s",
"all_deleted_s", "errors"}.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import requests

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DB = "postgres://127.0.0.1:5432/gpucloud_bench_compute"


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _recreate_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(host=parts.hostname, port=parts.port or 5432, user=parts.username or "root",
                         dbname="postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _prepare(hosts: int) -> dict:
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from apps.compute.models import Flavor, Image
    from apps.identity.models import User
    from apps.identity.services import api_token_create
    from apps.inventory.models import AgentCredential, Gpu, Host, Region, Zone
    from apps.tenancy.models import Membership, Organization, Project, Quota
    from apps.tenancy.quotas import PLANS

    org = Organization.objects.create(slug="bench", name="Bench", plan="enterprise")
    Quota.objects.bulk_create([Quota(organization=org, resource=r, limit=v) for r, v in PLANS["enterprise"].items()])
    project = Project.objects.create(organization=org, slug="bench", name="Bench")
    owner = User.objects.create_user("bench@example.com")
    Membership.objects.create(user=owner, organization=org, role="owner")
    _row, token = api_token_create(actor=None, user=owner, name="bench", scope="write", organization=org)
    zone = Zone.objects.create(region=Region.objects.create(name="bench"), name="bench-a")
    for n in range(hosts):
        h = Host.objects.create(name=f"bench-h{n}", zone=zone, serial=f"BENCH{n}", state="available",
                                provisioning_kind="hypervisor", libvirt_uri="test:///default", cpu_threads=224,
                                cpu_cores=112, memory_mib=2 * 1024 * 1024, numa_nodes=2)
        Gpu.objects.bulk_create([Gpu(host=h, index=i, model="H100-SXM5-80GB", uuid=f"GPU-bench-{n}-{i}",
                                     serial=f"B{n}-{i}", pci_address=f"0000:{0x18 + i:02x}:00.0",
                                     numa_node=i // 4) for i in range(8)])
        AgentCredential.objects.create(host=h, prefix=f"bench{n}", secret_hash="-")
    flavor = Flavor.objects.create(name="bench-1gpu", vcpus=4, memory_mib=16384, gpu_form="gpu",
                                   gpu_model="H100-SXM5-80GB", gpu_count=1)
    image = Image.objects.create(name="bench-img", os="ubuntu", source_url="https://images.test/bench.qcow2",
                                 checksum="")
    return {"token": token, "project": str(project.pk), "flavor": str(flavor.pk), "image": str(image.pk)}


def _agent_stand_in(stop: threading.Event) -> None:
    from django.db import close_old_connections, connection

    from apps.inventory.models import AgentCommand, AgentCredential
    from apps.inventory.services.agent import agent_command_report

    try:
        while not stop.is_set():
            close_old_connections()
            for cmd in AgentCommand.objects.filter(status="queued").select_related("host")[:50]:
                cred = AgentCredential.objects.get(host=cmd.host)
                agent_command_report(credential=cred, command_id=cmd.pk, succeeded=True, result={"health": "ok"})
            stop.wait(0.05)
    finally:
        connection.close()   # this thread's own connection (a test database must be droppable afterwards)


def _start(cmd: list[str], env: dict, *, log: Path | None = None, new_session: bool = False) -> subprocess.Popen:
    """Start `cmd` in the repository root; its output goes to `log` (default: nowhere). `new_session`: in a
    process group of its own, so `os.killpg(proc.pid, ...)` reaches its children too (a prefork worker's pool)."""
    out = open(log, "w") if log else subprocess.DEVNULL
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=new_session)


def _wait_http(base: str) -> None:
    for _ in range(240):
        try:
            if requests.get(f"{base}/healthz", timeout=5).status_code == 200:
                return
        except (requests.ConnectionError, requests.Timeout):
            time.sleep(0.25)
    raise SystemExit("gunicorn did not start")


def _wait_status(ids: list[str], status: str, timeout: float) -> float:
    from django.db import close_old_connections

    from apps.compute.models import Instance

    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        close_old_connections()
        if Instance.objects.filter(pk__in=ids, status=status).count() == len(ids):
            return time.perf_counter() - started
        time.sleep(0.2)
    bad = list(Instance.objects.filter(pk__in=ids).exclude(status=status).values_list("status", "error_code")[:5])
    raise SystemExit(f"timed out waiting for {status}: {bad}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    db = os.environ.get("BENCH_DATABASE_URL", DEFAULT_DB)
    _recreate_database(db)
    env = {**os.environ, "DATABASE_URL": db, "DJANGO_SETTINGS_MODULE": "gpucloud.settings",
           "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/7"), "COMPUTE_SEED_DIR": "/tmp/gc-bench",
           "COMPUTE_UEFI": "true"}
    os.environ.update(env)
    world = _prepare(hosts=(args.count + 7) // 8)
    venv = ROOT / ".venv" / "bin"
    subprocess.run([str(venv / "celery"), "-A", "gpucloud", "purge", "-f", "-Q", "provisioning"], cwd=ROOT, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    port = _free_port()
    procs = [_start([str(venv / "gunicorn"), "gpucloud.wsgi:application", "--bind", f"127.0.0.1:{port}",
                     "--workers", "2", "--threads", "2", "--log-level", "warning"], env),
             _start([str(venv / "celery"), "-A", "gpucloud", "worker", "-Q", "provisioning", "--pool", "threads",
                     "--concurrency", str(args.concurrency), "--loglevel", "warning"], env)]
    stop = threading.Event()
    agent = threading.Thread(target=_agent_stand_in, args=(stop,), daemon=True)
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_http(base)
        agent.start()
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {world['token']}"
        creates, deletes, ids, errors = [], [], [], 0
        for i in range(args.count):
            t0 = time.perf_counter()
            r = session.post(f"{base}/api/v1/instances/", json={
                "project": world["project"], "name": f"bench-{i}", "flavor": world["flavor"],
                "image": world["image"]}, headers={"Idempotency-Key": f"bench-{i}"})
            creates.append((time.perf_counter() - t0) * 1000)
            if r.status_code != 202:
                errors += 1
                continue
            ids.append(r.json()["instance"]["id"])
        all_active = _wait_status(ids, "active", args.timeout)
        from apps.compute.models import Instance

        c2a = [(i.launched_at - i.created_at).total_seconds() for i in Instance.objects.filter(pk__in=ids)]
        for pk in ids:
            t0 = time.perf_counter()
            r = session.delete(f"{base}/api/v1/instances/{pk}/")
            deletes.append((time.perf_counter() - t0) * 1000)
            errors += r.status_code != 202
        all_deleted = _wait_status(ids, "deleted", args.timeout)
    finally:
        stop.set()
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
    api = creates + deletes
    result = {"count": args.count, "api_p50_ms": round(_pct(api, 50), 1), "api_p99_ms": round(_pct(api, 99), 1),
              "create_p50_ms": round(_pct(creates, 50), 1), "create_p99_ms": round(_pct(creates, 99), 1),
              "delete_p50_ms": round(_pct(deletes, 50), 1), "delete_p99_ms": round(_pct(deletes, 99), 1),
              "create_to_active_p50_s": round(_pct(c2a, 50), 3), "create_to_active_p99_s": round(_pct(c2a, 99), 3),
              "all_active_s": round(all_active, 2), "all_deleted_s": round(all_deleted, 2), "errors": errors}
    print(f"{args.count} instances: API p50 {result['api_p50_ms']} ms, p99 {result['api_p99_ms']} ms; "
          f"create->active p50 {result['create_to_active_p50_s']} s, p99 {result['create_to_active_p99_s']} s")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
