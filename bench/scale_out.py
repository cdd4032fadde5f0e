"""Scale-out: instance creates per second with 1, 2 and 4 worker processes, and tenant read p99 beside agents.

Usage:
  .venv/bin/python bench/scale_out.py                         # small default: 16 creates, 200 agents, 30 s
  .venv/bin/python bench/scale_out.py --count 64 --agents 2000 --duration 120 --api-rps 100

It uses its own database (`gpucloud_bench_scale_out` on 127.0.0.1, dropped and re-created each run; override with
BENCH_DATABASE_URL) and REDIS_URL (default Redis db 7).

1. **Creates**: for each worker count W in `--workers` (default 1,2,4) it starts gunicorn (2 x 2 threads) and W
   Celery worker processes (`--pool threads --concurrency 4`, queue `provisioning`), POSTs `--count` instances
   (1 H100 each, hypervisors on `--libvirt-uri`) and waits until all are active; `creates_per_s_W` is the count
   over the time from the first POST to the last instance active (database timestamps). An operation's steps are
   separate tasks that any worker process may run, so W > 1 needs a compute driver whose state every process
   sees: with libvirt's `test:///` driver (the default; its domains live in one process) W > 1 is skipped and
   its key is null, with the reason under `limits`. Pass a shared one to measure: `qemu:///system`, or the test
   driver hosted by a libvirtd (`test+unix:///default?socket=DIR/libvirt-sock`, as tests/operations/test_scale_out.py).
   The node agent's commands (none on a plain create) are answered by a thread here, as in bench/instances.py.
2. **Tenant reads beside agents**: gunicorn (4 x 4 threads, the image's command) serves `--agents` simulated
   agents heartbeating every 15 s (bench/agents.py's load) and, at the same time, `GET /api/v1/instances/` of the
   tenant's project at `--api-rps` requests per second (open loop from 16 threads); `api_p99_ms` is those reads'
   p99 (client side, from sending to the whole answer).

Last stdout line, JSON: {"creates_per_s_1", "creates_per_s_2", "creates_per_s_4", "count", "api_p99_ms",
"api_p50_ms", "api_rps", "api_errors", "agents", "heartbeat_p99_ms", "heartbeat_errors", "limits", "load_avg_1m"}.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import agents as agents_bench  # noqa: E402  (the agents' load and helpers)
import instances as instances_bench  # noqa: E402  (the tenant world and the agent stand-in)

DEFAULT_DB = "postgres://127.0.0.1:5432/gpucloud_bench_scale_out"


def _gunicorn(port: int, workers: int, threads: int, env: dict) -> subprocess.Popen:
    return instances_bench._start([str(ROOT / ".venv" / "bin" / "gunicorn"), "--config", "deploy/gunicorn.conf.py",
                                   "gpucloud.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers",
                                   str(workers), "--threads", str(threads), "--log-level", "warning",
                                   "--backlog", "4096"], env)


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()


def _creates(world: dict, workers: int, count: int, env: dict, args) -> float:
    """Creates per second (create -> active) with `workers` Celery worker processes."""
    import requests
    from django.db.models import Max, Min

    from apps.compute.models import Instance

    venv = ROOT / ".venv" / "bin"
    subprocess.run([str(venv / "celery"), "-A", "gpucloud", "purge", "-f", "-Q", "provisioning"], cwd=ROOT, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    port = agents_bench._free_port()
    procs = [_gunicorn(port, 2, 2, env)] + [
        instances_bench._start([str(venv / "celery"), "-A", "gpucloud", "worker", "-Q", "provisioning", "--pool",
                                "threads", "--concurrency", "4", "--loglevel", "warning", "-n", f"bench{n}@%h"], env)
        for n in range(workers)]
    stop = threading.Event()
    stand_in = threading.Thread(target=instances_bench._agent_stand_in, args=(stop,), daemon=True)
    try:
        base = f"http://127.0.0.1:{port}"
        instances_bench._wait_http(base)
        stand_in.start()
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {world['token']}"
        ids = []
        for i in range(count):
            r = session.post(f"{base}/api/v1/instances/", json={
                "project": world["project"], "name": f"w{workers}-{i}", "flavor": world["flavor"],
                "image": world["image"]}, headers={"Idempotency-Key": f"scale-w{workers}-{i}"})
            if r.status_code != 202:
                raise SystemExit(f"create answered {r.status_code}: {r.text[:300]}")
            ids.append(r.json()["instance"]["id"])
        instances_bench._wait_status(ids, "active", args.timeout)
        span = Instance.objects.filter(pk__in=ids).aggregate(first=Min("created_at"), last=Max("launched_at"))
        return round(count / max(0.001, (span["last"] - span["first"]).total_seconds()), 2)
    finally:
        stop.set()
        _stop(procs)


def _reads(port: int, token: str, project: str, rps: float, t_end: float, out: dict) -> None:
    """Open-loop tenant reads at `rps` from 16 threads (each sends every 16/rps seconds)."""
    n_threads = 16
    period = n_threads / rps
    path = f"/api/v1/instances/?project={project}&page_size=20"
    headers = {"Authorization": f"Bearer {token}"}
    lock = threading.Lock()

    def reader(k: int) -> None:
        conn = agents_bench._Conn(port)
        due = time.monotonic() + k * period / n_threads
        lat, errors = [], 0
        while due < t_end:
            time.sleep(max(0.0, due - time.monotonic()))
            started = time.perf_counter()
            try:
                status, _ = conn.request("GET", path, headers, None)
                errors += status != 200
            except (OSError, http.client.HTTPException):
                errors += 1
            lat.append((time.perf_counter() - started) * 1000)
            due += period
        conn.close()
        with lock:
            out["latencies"] += lat
            out["errors"] += errors

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=16, help="instances created per worker count")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--libvirt-uri", default="test:///default")
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--interval", type=float, default=15.0)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of agents and tenant reads")
    parser.add_argument("--api-rps", type=float, default=100.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    db = os.environ.get("BENCH_DATABASE_URL", DEFAULT_DB)
    instances_bench._recreate_database(db)
    env = {**os.environ, "DATABASE_URL": db, "DJANGO_SETTINGS_MODULE": "gpucloud.settings",
           "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/7"), "COMPUTE_SEED_DIR": "/tmp/gc-bench",
           "COMPUTE_UEFI": "true"}
    os.environ.update(env)
    counts = [int(w) for w in args.workers.split(",") if w]
    world = instances_bench._prepare(hosts=(args.count * len(counts) + 7) // 8)
    if args.libvirt_uri != "test:///default":
        from apps.inventory.models import Host

        Host.objects.filter(libvirt_uri="test:///default").update(libvirt_uri=args.libvirt_uri)
    result: dict = {"count": args.count, "limits": {}}
    load_before = os.getloadavg()[0]
    for w in (1, 2, 4):
        key = f"creates_per_s_{w}"
        if w not in counts:
            result[key] = None
        elif w > 1 and args.libvirt_uri.startswith("test:"):
            result[key] = None
            result["limits"][key] = (f"skipped: {args.libvirt_uri} keeps its domains in one process, and a create's "
                                     "steps run on any worker process")
        else:
            result[key] = _creates(world, w, args.count, env, args)
            print(f"{w} worker process(es): {result[key]} creates/s ({args.count} instances, create -> active)")

    creds = agents_bench._prepare(args.agents)
    port = agents_bench._free_port()
    server = _gunicorn(port, 4, 4, env)
    instances_bench._wait_http(f"http://127.0.0.1:{port}")
    load_args = argparse.Namespace(interval=args.interval, duration=args.duration, inventory_every=20,
                                   always_poll=False, connections=32)
    reads = {"latencies": [], "errors": 0}
    try:
        t_end = time.monotonic() + args.duration
        reader = threading.Thread(target=_reads, args=(port, world["token"], world["project"], args.api_rps, t_end,
                                                       reads))
        reader.start()
        beats = agents_bench._load(port, creds, load_args)
        reader.join()
    finally:
        _stop([server])
    result.update({
        "api_p99_ms": agents_bench._percentile(reads["latencies"], 99),
        "api_p50_ms": agents_bench._percentile(reads["latencies"], 50),
        "api_rps": round(len(reads["latencies"]) / args.duration, 1),
        "api_errors": reads["errors"],
        "agents": args.agents,
        "heartbeat_p99_ms": agents_bench._percentile(beats["heartbeat"], 99),
        "heartbeat_errors": beats["errors"],
        "load_avg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    })
    print(f"tenant reads: {result['api_rps']} req/s, p50 {result['api_p50_ms']} ms, p99 {result['api_p99_ms']} ms, "
          f"{reads['errors']} errors, beside {args.agents} agents (heartbeat p99 {result['heartbeat_p99_ms']} ms)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
