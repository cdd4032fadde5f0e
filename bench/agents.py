"""Node agents at fleet scale: N simulated agents heartbeat a real gunicorn on PostgreSQL; counts DB writes.

Usage:
  .venv/bin/python bench/agents.py                        # 2,000 agents, 15 s interval, 300 s
  .venv/bin/python bench/agents.py --duration 60          # a shorter run (same rate, fewer cycles)
  .venv/bin/python bench/agents.py --always-poll          # agents that poll after every heartbeat (older agents)

It migrates the database named by DATABASE_URL, creates (idempotently) zone `bench-agents` with `--agents`
available hosts and one fresh agent credential each, starts `gunicorn gpucloud.wsgi` (`--web-workers` x
`--web-threads`, default 4 x 4, the image's command) on 127.0.0.1 and runs every agent's cycle as the real agent
does (`gpucloud_agent.agent`): `POST /api/v1/agent/heartbeat`, then `GET /api/v1/agent/commands` only when the
answer counts pending commands (every time with `--always-poll`), every `--interval` seconds (the agent's
default, 15 s), each agent starting at a random phase; every `--inventory-every`-th cycle the heartbeat carries
the host's (unchanged) facts. As beat would, it flushes the batched last-seen times every
AGENT_LAST_SEEN_FLUSH_SECONDS. Writes are PostgreSQL's own counters for this database (pg_stat_database:
tup_inserted + tup_updated + tup_deleted, xact_commit) between the start of the load and the end, read after
gunicorn exits (a backend reports its counters at the latest when it ends). CPU: gunicorn's (master and workers, from
the kernel's accounting, during the load) and this client's, per request sent; PostgreSQL's is not counted.
The 1-minute load average at the start and end says how busy the machine was. The last stdout line is JSON:
{"agents", "interval_s", "duration_s", "heartbeats" (answered 200), "expected_heartbeats", "heartbeat_p50_ms",
 "heartbeat_p99_ms", "lateness_p99_ms" (how late the client started cycles), "polls", "poll_p99_ms", "errors", "error_kinds", "rows_written", "xact_commit", "writes_per_heartbeat",
 "web", "server_cpu_ms_per_request", "client_cpu_ms_per_request", "load_avg_1m"}.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import http.client
import json
import os
import queue
import random
import resource
import secrets
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil

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
    run = secrets.token_hex(3)  # fresh prefixes each run: a cached row of an earlier run's credential never matches
    creds = []
    for i, host in enumerate(hosts):
        prefix, secret = f"b{run}{i:06d}", f"bench-secret-{i:07d}"
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


def _start_server(port: int, workers: int, threads: int) -> subprocess.Popen:
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
        str(threads),
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


class _Conn:
    """One client thread's keep-alive connection (stdlib http.client: a few hundred microseconds of CPU per request,
    so the load generator is not what the benchmark measures). A connection idle for 1 s is replaced before use:
    gunicorn closes idle ones after 2 s (its keep-alive), and a request sent on one it is closing would fail."""

    def __init__(self, port: int):
        self.port, self.conn, self.used = port, None, 0.0

    def request(self, method: str, path: str, headers: dict, body: bytes | None) -> tuple[int, bytes]:
        if self.conn is None or time.monotonic() - self.used > 1.0:
            self.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            self.conn.request(method, path, body=body, headers=headers)
            resp = self.conn.getresponse()
            data = resp.read()
        except Exception:
            self.close()
            raise
        self.used = time.monotonic()
        if resp.will_close:
            self.close()
        return resp.status, data

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _call(conn: _Conn, method: str, path: str, headers: dict, payload, out: dict, bucket: list) -> dict | None:
    """One agent request; its latency goes to `bucket`; returns the JSON object of a 200, else None (an error,
    counted in `out["error_kinds"]` by status or exception class)."""
    body = json.dumps(payload).encode() if payload is not None else None
    started = time.perf_counter()
    try:
        status, data = conn.request(method, f"/api/v1/agent/{path}", headers, body)
        kind = None if status == 200 else f"http {status}"
        answer = json.loads(data) if kind is None else None
    except (OSError, http.client.HTTPException, ValueError) as exc:
        kind, answer = type(exc).__name__, None
    bucket.append((time.perf_counter() - started) * 1000)
    if kind is not None:
        out["errors"] += 1
        out["error_kinds"][kind] = out["error_kinds"].get(kind, 0) + 1
        return None
    out["ok_heartbeats"] += 1 if path == "heartbeat" else 0
    return answer if isinstance(answer, dict) else {}


def _cycle(conn: _Conn, i: int, cycle: int, cred: str, args, out: dict) -> None:
    """What the agent does once per interval: heartbeat; poll commands when the answer counts some."""
    headers = {"Authorization": f"Agent {cred}", "Content-Type": "application/json"}
    body = {"agent_version": "bench"}
    if args.inventory_every and (i + cycle) % args.inventory_every == 0:
        body["inventory"] = {"host": FACTS}
    beat = _call(conn, "POST", "heartbeat", headers, body, out, out["heartbeat"])
    if beat is not None and (args.always_poll or beat.get("pending_commands", 1)):
        _call(conn, "GET", "commands", {"Authorization": headers["Authorization"]}, None, out, out["poll"])


def _load(port: int, creds: list[str], args) -> dict:
    """Every agent's cycles at their due times (each agent at a random phase), run by `--connections` client
    threads from one queue in due order. `lateness` is how late a cycle started (the client, or the server's
    backlog holding every thread, fell behind); latencies are from sending to the whole answer."""
    out = {"heartbeat": [], "poll": [], "lateness": [], "errors": 0, "error_kinds": {}, "ok_heartbeats": 0}
    start = time.monotonic()
    t_end = start + args.duration
    due = [(start + random.uniform(0, args.interval), i, 0) for i in range(len(creds))]
    heapq.heapify(due)
    work: queue.Queue = queue.Queue()
    lock = threading.Lock()

    def client() -> None:
        conn = _Conn(port)
        mine = {"heartbeat": [], "poll": [], "lateness": [], "errors": 0, "error_kinds": {}, "ok_heartbeats": 0}
        while (item := work.get()) is not None:
            at, i, cycle = item
            mine["lateness"].append((time.monotonic() - at) * 1000)
            _cycle(conn, i, cycle, creds[i], args, mine)
        conn.close()
        with lock:
            for key in ("heartbeat", "poll", "lateness"):
                out[key] += mine[key]
            out["errors"] += mine["errors"]
            out["ok_heartbeats"] += mine["ok_heartbeats"]
            for kind, n in mine["error_kinds"].items():
                out["error_kinds"][kind] = out["error_kinds"].get(kind, 0) + n

    threads = [threading.Thread(target=client) for _ in range(args.connections)]
    for t in threads:
        t.start()
    while due and due[0][0] < t_end:
        at, i, cycle = heapq.heappop(due)
        time.sleep(max(0.0, at - time.monotonic()))
        work.put((at, i, cycle))
        heapq.heappush(due, (at + args.interval, i, cycle + 1))
    for _ in threads:
        work.put(None)
    for t in threads:
        t.join()
    return out


def _cpu_s(usage) -> float:
    return usage.ru_utime + usage.ru_stime


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by gunicorn's master and its workers."""
    master = psutil.Process(pid)
    total = 0.0
    for proc in [master, *master.children(recursive=True)]:
        try:
            t = proc.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument(
        "--interval", type=float, default=15.0, help="heartbeat interval (the agent's default)"
    )
    parser.add_argument("--duration", type=float, default=300.0)
    parser.add_argument("--inventory-every", type=int, default=20, help="the agent's default; 0 = never")
    parser.add_argument("--web-workers", type=int, default=4)
    parser.add_argument("--web-threads", type=int, default=4)
    parser.add_argument("--connections", type=int, default=64, help="client threads, one connection each")
    parser.add_argument("--always-poll", action="store_true",
                        help="poll commands after every heartbeat (agents before 'poll only when pending_commands')")
    args = parser.parse_args()
    creds = _prepare(args.agents)
    port = _free_port()
    server = _start_server(port, args.web_workers, args.web_threads)
    stop = threading.Event()
    load_before = os.getloadavg()[0]
    try:
        before = _counters()
        client_cpu = resource.getrusage(resource.RUSAGE_SELF)
        server_cpu = _tree_cpu_s(server.pid)
        flusher = threading.Thread(target=_flusher, args=(stop,))
        flusher.start()
        started = time.monotonic()
        out = _load(port, creds, args)
        elapsed = time.monotonic() - started
        client_cpu_s = _cpu_s(resource.getrusage(resource.RUSAGE_SELF)) - _cpu_s(client_cpu)
        server_cpu_s = _tree_cpu_s(server.pid) - server_cpu
        load_after = os.getloadavg()[0]
        stop.set()
        flusher.join()
    finally:
        stop.set()
        server.terminate()
        server.wait(timeout=60)
    time.sleep(1.5)
    after = _counters()
    beats = out["ok_heartbeats"]  # answered 200; latencies include the failed ones
    requests = len(out["heartbeat"]) + len(out["poll"])
    rows = after["rows"] - before["rows"]
    summary = {
        "agents": args.agents,
        "interval_s": args.interval,
        "duration_s": round(elapsed, 1),
        "heartbeats": beats,
        "expected_heartbeats": round(args.agents * args.duration / args.interval),
        "heartbeat_p50_ms": _percentile(out["heartbeat"], 50),
        "heartbeat_p99_ms": _percentile(out["heartbeat"], 99),
        "lateness_p99_ms": _percentile(out["lateness"], 99),
        "polls": len(out["poll"]),
        "poll_p99_ms": _percentile(out["poll"], 99),
        "errors": out["errors"],
        "error_kinds": out["error_kinds"],
        "rows_written": rows,
        "xact_commit": after["xacts"] - before["xacts"],
        "writes_per_heartbeat": round(rows / beats, 4) if beats else None,
        "web": f"{args.web_workers} workers x {args.web_threads} threads",
        "server_cpu_ms_per_request": round(server_cpu_s * 1000 / requests, 2) if requests else None,
        "client_cpu_ms_per_request": round(client_cpu_s * 1000 / requests, 2) if requests else None,
        "load_avg_1m": [round(load_before, 2), round(load_after, 2)],
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
