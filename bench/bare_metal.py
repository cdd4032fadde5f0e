"""Bare-metal benchmark: N hosts (default 50) on a real Ironic standalone with the `fake-hardware` type, enrolled,
then deployed concurrently by one tenant through the API, then all deleted (undeploy, cleaning, receipts).

Usage:
  .venv/bin/python bench/bare_metal.py [--hosts 50] [--concurrency 8] [--timeout 900]

It uses its own database (`gpucloud_bench_baremetal` on 127.0.0.1, dropped and re-created each run; override with
BENCH_DATABASE_URL), Redis db 8 (override with REDIS_URL), Ironic from var/ironic/venv (`make ironic`) on a free
port with its SQLite database in a temp dir, gunicorn (2 workers x 2 threads) and one Celery worker (`--pool
threads`, `--concurrency` threads, queue `provisioning`, where the bare-metal workflows run). fake-hardware runs no
deploy ramdisk: the figures are the control plane's and Ironic's state machine's (API, step runner, ledger,
openstacksdk, Ironic's conductor), not a real server's minutes of image writing.

Steps: N hosts (8 H100 each, provisioning kind baremetal) enrolled with `fake-hardware` (enroll → manage → inspect →
provide), waited until all nodes are `available`; N `POST /api/v1/instances` of the bare-metal flavor sent at once
(`--concurrency` client threads), waited until all are `active`; N `DELETE`s, waited until all are `deleted`.

Figures: `per_host_p50_s`/`p99_s` are `launched_at - created_at` of each instance (database timestamps);
`all_active_s`/`all_deleted_s` wall time from the first request to the last instance in the state; `stuck` the
instances not active when the wait ended (or failed); `receipts` the exit receipts issued. Last line is JSON:
{"hosts", "enroll_s", "all_active_s", "p50_s", "p99_s", "stuck", "all_deleted_s", "all_receipts_s", "receipts",
"errors"}; `all_receipts_s` from the first delete to the last receipt (signed by each host's cleaning, after the
delete).
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from instances import ROOT, _free_port, _pct, _recreate_database, _start, _wait_http  # noqa: E402

DEFAULT_DB = "postgres://127.0.0.1:5432/gpucloud_bench_baremetal"


def _prepare(hosts: int) -> dict:
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from apps.compute.models import Flavor, Image
    from apps.identity.models import User
    from apps.identity.services import api_token_create
    from apps.inventory.models import Gpu, Host, Nic, Region, Zone
    from apps.tenancy.models import Membership, Organization, Project, Quota
    from apps.tenancy.quotas import PLANS

    org = Organization.objects.create(slug="bench", name="Bench", plan="enterprise")
    Quota.objects.bulk_create([Quota(organization=org, resource=r, limit=10**9) for r in PLANS["enterprise"]])
    project = Project.objects.create(organization=org, slug="bench", name="Bench")
    owner = User.objects.create_user("bench@example.com")
    Membership.objects.create(user=owner, organization=org, role="owner")
    _row, token = api_token_create(actor=None, user=owner, name="bench", scope="write", organization=org)
    zone = Zone.objects.create(region=Region.objects.create(name="bench"), name="bench-a")
    for n in range(hosts):
        h = Host.objects.create(name=f"bench-bm{n}", zone=zone, serial=f"BENCHBM{n}", state="available",
                                provisioning_kind="baremetal", cpu_threads=224, cpu_cores=112,
                                memory_mib=2 * 1024 * 1024, numa_nodes=2)
        Gpu.objects.bulk_create([Gpu(host=h, index=i, model="H100-SXM5-80GB", uuid=f"GPU-bm-{n}-{i}",
                                     serial=f"BM{n}-{i}", pci_address=f"0000:{0x18 + i:02x}:00.0",
                                     numa_node=i // 4) for i in range(8)])
        Nic.objects.create(host=h, name="eno1", mac_address=f"52:54:00:{n >> 16 & 255:02x}:{n >> 8 & 255:02x}:"
                                                              f"{n & 255:02x}")
    flavor = Flavor.objects.create(name="bench-bm-h100x8", kind="baremetal", vcpus=224, memory_mib=2 * 1024 * 1024,
                                   gpu_form="gpu", gpu_model="H100-SXM5-80GB", gpu_count=8)
    image = Image.objects.create(name="bench-img", os="ubuntu", source_url="https://images.test/bench.qcow2",
                                 checksum="sha256:" + "ab" * 32)
    return {"token": token, "project": str(project.pk), "flavor": str(flavor.pk), "image": str(image.pk)}


def _enroll_all(timeout: float) -> float:
    from django.db import close_old_connections

    from apps.baremetal.models import BaremetalNode
    from apps.baremetal.services.nodes import node_enroll
    from apps.inventory.models import Host

    started = time.perf_counter()
    for host in Host.objects.filter(provisioning_kind="baremetal"):
        node_enroll(actor=None, host=host, driver="fake-hardware")
    total = BaremetalNode.objects.count()
    while time.perf_counter() - started < timeout:
        close_old_connections()
        if Host.objects.filter(provisioning_kind="baremetal", state="available").count() == total:
            return time.perf_counter() - started
        time.sleep(0.5)
    raise SystemExit(f"enrollment timed out: {list(BaremetalNode.objects.values_list('provision_state', 'held_reason'))[:5]}")


def _wait(ids: list[str], status: str, timeout: float) -> tuple[float, int]:
    from django.db import close_old_connections

    from apps.compute.models import Instance

    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        close_old_connections()
        done = Instance.objects.filter(pk__in=ids, status=status).count()
        if done + Instance.objects.filter(pk__in=ids, status="error").count() == len(ids):
            break
        time.sleep(0.25)
    return time.perf_counter() - started, len(ids) - Instance.objects.filter(pk__in=ids, status=status).count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()
    db = os.environ.get("BENCH_DATABASE_URL", DEFAULT_DB)
    _recreate_database(db)
    ironic_dir = Path(tempfile.mkdtemp(prefix="gc-bench-ironic-"))
    script = str(ROOT / "scripts" / "ironic-standalone.sh")
    run = subprocess.run([script, "start", str(ironic_dir), str(_free_port())], cwd=ROOT, capture_output=True,
                         text=True, timeout=240)
    if run.returncode != 0:
        raise SystemExit(f"Ironic did not start (make ironic?): {run.stderr[-2000:]}")
    env = {**os.environ, "DATABASE_URL": db, "DJANGO_SETTINGS_MODULE": "gpucloud.settings",
           "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/8"),
           "BAREMETAL_IRONIC_ENDPOINT": run.stdout.strip(), "BAREMETAL_DEPLOY_POLL_S": "0.5",
           "SECRET_KEY": os.environ.get("SECRET_KEY") or secrets.token_urlsafe(50)}
    env["CELERY_BROKER_URL"] = env["CELERY_RESULT_BACKEND"] = env["REDIS_URL"]
    os.environ.update(env)
    try:
        _run(args, env)
    finally:  # Ironic is stopped whatever failed (even the setup)
        subprocess.run([script, "stop", str(ironic_dir)], cwd=ROOT, check=False)
        shutil.rmtree(ironic_dir, ignore_errors=True)


def _run(args, env: dict) -> None:
    world = _prepare(args.hosts)
    venv = ROOT / ".venv" / "bin"
    subprocess.run([str(venv / "celery"), "-A", "gpucloud", "purge", "-f", "-Q", "provisioning"], cwd=ROOT, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    port = _free_port()
    procs = [_start([str(venv / "gunicorn"), "gpucloud.wsgi:application", "--bind", f"127.0.0.1:{port}",
                     "--workers", "2", "--threads", "2", "--log-level", "warning"], env),
             _start([str(venv / "celery"), "-A", "gpucloud", "worker", "-Q", "provisioning", "--pool", "threads",
                     "--concurrency", str(args.concurrency), "--loglevel", "warning"], env)]
    errors = 0
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_http(base)
        enroll_s = _enroll_all(args.timeout)
        headers = {"Authorization": f"Bearer {world['token']}"}

        def create(i: int):
            return requests.post(f"{base}/api/v1/instances/", headers=headers, timeout=60, json={
                "project": world["project"], "name": f"bm-{i}", "flavor": world["flavor"], "image": world["image"]})

        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.concurrency) as pool:
            answers = list(pool.map(create, range(args.hosts)))
        ids = [r.json()["instance"]["id"] for r in answers if r.status_code == 202]
        errors += len(answers) - len(ids)
        _waited, stuck = _wait(ids, "active", args.timeout)
        all_active = time.perf_counter() - t0
        from apps.baremetal.models import ExitReceipt
        from apps.compute.models import Instance

        per_host = [(i.launched_at - i.created_at).total_seconds()
                    for i in Instance.objects.filter(pk__in=ids, launched_at__isnull=False)]
        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.concurrency) as pool:
            deletes = list(pool.map(lambda pk: requests.delete(f"{base}/api/v1/instances/{pk}/", headers=headers,
                                                               timeout=60), ids))
        errors += sum(r.status_code != 202 for r in deletes)
        _waited, not_deleted = _wait(ids, "deleted", args.timeout)
        all_deleted = time.perf_counter() - t0
        errors += not_deleted
        # the receipts are signed by each host's cleaning, which goes on after the delete (docs/adr/1215)
        end = time.monotonic() + args.timeout
        while (receipts := ExitReceipt.objects.filter(instance_id__in=ids).count()) < len(ids) \
                and time.monotonic() < end:
            time.sleep(0.5)
        all_receipts = time.perf_counter() - t0
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
    result = {"hosts": args.hosts, "enroll_s": round(enroll_s, 2), "all_active_s": round(all_active, 2),
              "p50_s": round(_pct(per_host, 50), 2), "p99_s": round(_pct(per_host, 99), 2), "stuck": stuck,
              "all_deleted_s": round(all_deleted, 2), "all_receipts_s": round(all_receipts, 2), "receipts": receipts,
              "errors": errors}
    print(f"{args.hosts} fake-hardware hosts: enrolled in {result['enroll_s']} s; all active in "
          f"{result['all_active_s']} s (per host p50 {result['p50_s']} s, p99 {result['p99_s']} s, stuck {stuck}); "
          f"all deleted in {result['all_deleted_s']} s, {receipts} receipts")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
