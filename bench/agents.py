"""Node agents at fleet scale: N simulated agents heartbeat a real gunicorn on PostgreSQL; counts DB writes.

Usage:
  .venv/bin/python bench/agents.py                        # 2,000 agents, 15 s interval, 300 s
  .venv/bin/python bench/agents.py --duration 60          # a shorter run (same rate, fewer cycles)

It migrates the database named by DATABASE_URL, creates (idempotently) zone `bench-agents` with `--agents`
available hosts and one agent credential each, starts `gunicorn gpucloud.wsgi` (`--web-workers` x 4 threads,
the image's command) on 127.0.0.1 and runs every agent's cycle as the real agent does (`gpucloud_agent.agent`):
`POST /api/v1/agent/heartbeat` then `GET /api/v1/agent/commands`, every `--interval` seconds (the agent's
default, 15 s), each agent starting at a random phase; every `--inventory-every`-th cycle the heartbeat carries
the host's (unchanged) facts. As beat would, it flushes the batched last-seen times every
AGENT_LAST_SEEN_FLUSH_SECONDS. Writes are PostgreSQL's own counters for this database (pg_stat_database:
tup_inserted + tup_updated + tup_deleted, xact_commit) between the start of the load and the end, read after
gunicorn exits (a backend reports its counters at the latest when it ends). The last stdout line is JSON:
{"agents", "interval_s", "duration_s", "heartbeats" (answered 200), "expected_heartbeats", "heartbeat_p50_ms",
 "heartbeat_p99_ms", "poll_p99_ms", "errors", "rows_written", "xact_commit", "writes_per_heartbeat"}.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
FACTS = {
    "cpu_sockets": 2,
    "cpu_cores": 112,
    "cpu_threads": 224,
    "memory_mib": 2097152,
    "numa_nodes": 2,
    "driver_version": "550.90.07",
}


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))], 2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prepare(n: int) -> list[str]:
    """Migrate; make `n` available hosts with one credential each (idempotent); returns the credentials."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from apps.inventory.models import AgentCredential, Host, Region, Zone

    region, _ = Region.objects.get_or_create(name="bench-agents")
    zone, _ = Zone.objects.get_or_create(name="bench-agents", defaults={"region": region})
    have = set(Host.objects.filter(zone=zone).values_list("name", flat=True))
    Host.objects.bulk_create(
        [
            Host(
                name=f"bench-agent-{i:05d}",
                zone=zone,
                serial=f"BENCH-AGENT-{i:05d}",
                state="available",
                agent_version="bench",
                **FACTS,
            )
            for i in range(n)
            if f"bench-agent-{i:05d}" not in have
        ],
        batch_size=1000,
    )
    hosts = list(Host.objects.filter(zone=zone).order_by("name")[:n])
    AgentCredential.objects.filter(host__in=hosts).delete()
    creds = []
    for i, host in enumerate(hosts):
        prefix, secret = f"bench{i:07d}", f"bench-secret-{i:07d}"
        creds.append(
            (
                AgentCredential(
                    host=host, prefix=prefix, secret_hash=hashlib.sha256(secret.encode()).hexdigest()
                ),
                f"{prefix}.{secret}",
            )
        )
    AgentCredential.objects.bulk_create([c for c, _ in creds], batch_size=1000)
    return [clear for _, clear in creds]


def _counters() -> dict:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute(
            "SELECT tup_inserted + tup_updated + tup_deleted, xact_commit FROM pg_stat_database"
            " WHERE datname = current_database()"
        )
        rows, xacts = cur.fetchone()
    return {"rows": rows, "xacts": xacts}


def _flusher(stop: threading.Event) -> None:
    from django.conf import settings
    from django.db import connection

    try:
        from apps.inventory.services.last_seen import agent_last_seen_flush
    except ImportError:  # a checkout without batched last-seen: nothing to flush
        return
    while not stop.wait(settings.AGENT_LAST_SEEN_FLUSH_SECONDS):
        agent_last_seen_flush()
    agent_last_seen_flush()
    connection.close()


def _start_server(port: int, workers: int) -> subprocess.Popen:
    cmd = [
        str(ROOT / ".venv" / "bin" / "gunicorn"),
        "--config",
        "deploy/gunicorn.conf.py",
        "gpucloud.wsgi:application",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--threads",
        "4",
        "--log-level",
        "warning",
        "--backlog",
        "4096",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(240):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.25)
    proc.terminate()
    raise SystemExit("gunicorn did not start")


async def _agent(client: httpx.AsyncClient, i: int, cred: str, args, t_end: float, out: dict) -> None:
    headers = {"Authorization": f"Agent {cred}"}
    await asyncio.sleep(random.uniform(0, args.interval))
    cycle = 0
    while time.monotonic() < t_end:
        due = time.monotonic() + args.interval
        body = {"agent_version": "bench"}
        if args.inventory_every and (i + cycle) % args.inventory_every == 0:
            body["inventory"] = {"host": FACTS}
        cycle += 1
        for method, path, bucket, payload in (
            ("POST", "heartbeat", out["heartbeat"], body),
            ("GET", "commands", out["poll"], None),
        ):
            started = time.perf_counter()
            try:
                r = await client.request(method, f"/api/v1/agent/{path}", headers=headers, json=payload)
                ok = r.status_code == 200
            except httpx.HTTPError:
                ok = False
            bucket.append((time.perf_counter() - started) * 1000)
            out["errors"] += 0 if ok else 1
            out["ok_heartbeats"] += 1 if ok and path == "heartbeat" else 0
        await asyncio.sleep(max(0.0, due - time.monotonic()))


async def _load(base: str, creds: list[str], args) -> dict:
    out = {"heartbeat": [], "poll": [], "errors": 0, "ok_heartbeats": 0}
    limits = httpx.Limits(max_connections=args.connections, max_keepalive_connections=args.connections)
    async with httpx.AsyncClient(
        base_url=base, limits=limits, timeout=httpx.Timeout(30.0, pool=60.0)
    ) as client:
        t_end = time.monotonic() + args.duration
        await asyncio.gather(*(_agent(client, i, c, args, t_end, out) for i, c in enumerate(creds)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument(
        "--interval", type=float, default=15.0, help="heartbeat interval (the agent's default)"
    )
    parser.add_argument("--duration", type=float, default=300.0)
    parser.add_argument("--inventory-every", type=int, default=20, help="the agent's default; 0 = never")
    parser.add_argument("--web-workers", type=int, default=4)
    parser.add_argument("--connections", type=int, default=64, help="client connection pool")
    args = parser.parse_args()
    creds = _prepare(args.agents)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a log line per request
    port = _free_port()
    server = _start_server(port, args.web_workers)
    stop = threading.Event()
    try:
        before = _counters()
        flusher = threading.Thread(target=_flusher, args=(stop,))
        flusher.start()
        started = time.monotonic()
        out = asyncio.run(_load(f"http://127.0.0.1:{port}", creds, args))
        elapsed = time.monotonic() - started
        stop.set()
        flusher.join()
    finally:
        stop.set()
        server.terminate()
        server.wait(timeout=60)
    time.sleep(1.5)
    after = _counters()
    beats = out["ok_heartbeats"]  # answered 200; latencies include the failed ones
    rows = after["rows"] - before["rows"]
    summary = {
        "agents": args.agents,
        "interval_s": args.interval,
        "duration_s": round(elapsed, 1),
        "heartbeats": beats,
        "expected_heartbeats": round(args.agents * args.duration / args.interval),
        "heartbeat_p50_ms": _percentile(out["heartbeat"], 50),
        "heartbeat_p99_ms": _percentile(out["heartbeat"], 99),
        "poll_p99_ms": _percentile(out["poll"], 99),
        "errors": out["errors"],
        "rows_written": rows,
        "xact_commit": after["xacts"] - before["xacts"],
        "writes_per_heartbeat": round(rows / beats, 4) if beats else None,
    }
    print(
        f"{args.agents} agents every {args.interval} s for {summary['duration_s']} s: {beats} heartbeats "
        f"(expected {summary['expected_heartbeats']}), {out['errors']} errors"
    )
    print(
        f"heartbeat p50 {summary['heartbeat_p50_ms']} ms  p99 {summary['heartbeat_p99_ms']} ms; "
        f"{rows} rows written ({summary['writes_per_heartbeat']} per heartbeat), {summary['xact_commit']} commits"
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
