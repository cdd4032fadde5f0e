"""API load benchmark: 16 concurrent clients for 30 s against /api/v1/projects (list and create).

Usage:
  .venv/bin/python bench/api_load.py                      # starts gunicorn on a free port (normal DATABASE_URL)
  .venv/bin/python bench/api_load.py --base-url URL --token TOKEN --organization ORG_ID

Without --base-url it migrates the database named by DATABASE_URL, creates (idempotently) organization `bench`
with owner bench@example.com and a large `projects` quota, mints a write token, starts
`gunicorn gpucloud.wsgi` (2 workers x 4 threads) on 127.0.0.1, and removes the projects it created afterwards.
Each client loops: 4 of 5 requests `GET /api/v1/projects/?organization=<id>&page_size=20`, 1 of 5
`POST /api/v1/projects/` (a quota-checked create: it takes the organization row lock, so creates serialize).
Latencies are wall-clock per request (client side, keep-alive sessions). The last stdout line is JSON:
{"p50_ms", "p99_ms", "rps", "requests", "errors", "clients", "duration_s", "list_p50_ms", "list_p99_ms",
 "create_p50_ms", "create_p99_ms"}.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prepare() -> tuple[str, str]:
    """Migrate, create the bench tenant and a write token; returns (token, organization id)."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from apps.identity.models import User
    from apps.identity.services import api_token_create
    from apps.tenancy.models import Membership, Organization, Quota
    from apps.tenancy.quotas import PLANS

    org, created = Organization.objects.get_or_create(slug="bench", defaults={"name": "Bench", "plan": "enterprise"})
    if created:
        Quota.objects.bulk_create([Quota(organization=org, resource=r, limit=v) for r, v in PLANS[org.plan].items()])
    Quota.objects.update_or_create(organization=org, project=None, resource="projects",
                                   defaults={"limit": 10**9})
    owner = User.objects.filter(email="bench@example.com").first() or User.objects.create_user("bench@example.com")
    Membership.objects.get_or_create(user=owner, organization=org, project=None, defaults={"role": "owner"})
    _row, raw = api_token_create(actor=None, user=owner, name="bench", scope="write", organization=org)
    return raw, str(org.pk)


def _cleanup(org_id: str) -> None:
    from apps.identity.models import ApiToken
    from apps.tenancy.models import Project

    Project.objects.filter(organization_id=org_id, slug__startswith="bench-").delete()
    ApiToken.objects.filter(organization_id=org_id, name="bench").delete()


def _start_server(port: int) -> subprocess.Popen:
    cmd = [str(ROOT / ".venv" / "bin" / "gunicorn"), "gpucloud.wsgi:application", "--bind", f"127.0.0.1:{port}",
           "--workers", "2", "--threads", "4", "--log-level", "warning"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(120):
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200:
                return proc
        except (requests.ConnectionError, requests.Timeout):
            time.sleep(0.25)
    proc.terminate()
    raise SystemExit("gunicorn did not start")


def _client(base: str, token: str, org_id: str, deadline: float, out: dict, lock: threading.Lock) -> None:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    lists, creates, errors, i = [], [], 0, 0
    while time.perf_counter() < deadline:
        i += 1
        started = time.perf_counter()
        if i % 5 == 0:
            slug = f"bench-{uuid.uuid4().hex[:16]}"
            r = session.post(f"{base}/api/v1/projects/", json={"organization": org_id, "slug": slug, "name": slug})
            bucket, ok = creates, r.status_code == 201
        else:
            r = session.get(f"{base}/api/v1/projects/", params={"organization": org_id, "page_size": 20})
            bucket, ok = lists, r.status_code == 200
        bucket.append((time.perf_counter() - started) * 1000)
        errors += 0 if ok else 1
    with lock:
        out["list"].extend(lists)
        out["create"].extend(creates)
        out["errors"] += errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url")
    parser.add_argument("--token")
    parser.add_argument("--organization")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=30.0)
    args = parser.parse_args()
    server = None
    if args.base_url:
        if not (args.token and args.organization):
            parser.error("--base-url needs --token and --organization")
        base, token, org_id = args.base_url.rstrip("/"), args.token, args.organization
    else:
        token, org_id = _prepare()
        port = _free_port()
        server = _start_server(port)
        base = f"http://127.0.0.1:{port}"
    results = {"list": [], "create": [], "errors": 0}
    lock = threading.Lock()
    try:
        deadline = time.perf_counter() + args.duration
        started = time.perf_counter()
        threads = [threading.Thread(target=_client, args=(base, token, org_id, deadline, results, lock))
                   for _ in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    if server is not None:
        _cleanup(org_id)
    every = results["list"] + results["create"]
    summary = {
        "p50_ms": round(statistics.median(every), 2) if every else None,
        "p99_ms": round(_percentile(every, 99), 2),
        "rps": round(len(every) / elapsed, 1),
        "requests": len(every), "errors": results["errors"], "clients": args.clients,
        "duration_s": round(elapsed, 1),
        "list_p50_ms": round(_percentile(results["list"], 50), 2),
        "list_p99_ms": round(_percentile(results["list"], 99), 2),
        "create_p50_ms": round(_percentile(results["create"], 50), 2),
        "create_p99_ms": round(_percentile(results["create"], 99), 2),
    }
    print(f"{args.clients} clients, {summary['duration_s']} s, {summary['requests']} requests, "
          f"{summary['errors']} errors")
    print(f"list   p50 {summary['list_p50_ms']} ms  p99 {summary['list_p99_ms']} ms  ({len(results['list'])})")
    print(f"create p50 {summary['create_p50_ms']} ms  p99 {summary['create_p99_ms']} ms  ({len(results['create'])})")
    print(f"all    p50 {summary['p50_ms']} ms  p99 {summary['p99_ms']} ms  {summary['rps']} req/s")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
