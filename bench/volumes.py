"""Volume benchmark: create N volumes (default 200) and attach them to M instances (default 50) through the API and
a Celery worker; prints p50/p99 of create → available and attach → attached.

Usage:
  .venv/bin/python bench/volumes.py [--volumes 200] [--instances 50] [--concurrency 4]

Drivers: the instances' domains and the volumes' pool are both on libvirt's test driver (`test:///default`,
in the worker's process), through the production drivers (`LibvirtDriver`, `LibvirtStorageDriver`): pools and
volumes are libvirt test-driver pool volumes. That driver cannot hot-plug (no `virDomainAttachDeviceFlags`), so an
attach there redefines the domain with the disk and power-cycles it; the hot-plug into a running QEMU guest that
real hosts do is checked by the contract tests (tests/storage/test_driver_libvirt.py, a private libvirtd), not
timed here. So the figures are the control plane's: API, operations, step runner, Celery, PostgreSQL.

It uses its own database (`gpucloud_bench_storage` on 127.0.0.1, dropped and re-created each run; override with
BENCH_DATABASE_URL) and Redis db 7 (override with REDIS_URL), the hosts, flavor and image of bench/instances.py
(one 8-GPU host per 8 instances), shared `dir` volume types (one per 100 volumes: a test-driver pool holds 100
GiB), gunicorn (2 workers x 2 threads) and one Celery
worker (`--pool threads`, `--concurrency` threads, queue `provisioning`, where the storage workflows run).

Steps: POST /instances for M instances, wait until all are active; POST /volumes for N 1-GiB volumes (one by
one, keep-alive session), wait until all are `available`; POST /volumes/{id}/attach/ for each, round-robin over
the instances (N/M per instance), wait until all are `in-use`.

Figures: `create_*_s` and `attach_*_s` are `finished_at - created_at` of each `volume.create` / `volume.attach`
operation (database timestamps: from the request's commit to the end of its step); `api_*_ms` are client-side
latencies of the POSTs. `errors` counts non-202 answers, failed operations and attached volumes without an
`attached` attachment row. The last stdout line is JSON:
{"volumes", "instances", "driver", "create_p50_s", "create_p99_s", "attach_p50_s", "attach_p99_s", "api_p50_ms",
"api_p99_ms", "all_available_s", "all_attached_s", "errors"}.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from instances import ROOT, _free_port, _pct, _prepare, _recreate_database, _start, _wait_http  # noqa: E402

DEFAULT_DB = "postgres://127.0.0.1:5432/gpucloud_bench_storage"
URI = "test:///default"
TEST_POOL_GIB = 100


def _wait(model_name: str, ids: list[str], status: str, timeout: float) -> float:
    from django.apps import apps
    from django.db import close_old_connections

    model = apps.get_model(model_name)
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        close_old_connections()
        done = model.objects.filter(pk__in=ids, status=status).count()
        failed = model.objects.filter(pk__in=ids, status="error").count()
        if done + failed == len(ids):
            return time.perf_counter() - started
        time.sleep(0.2)
    bad = list(model.objects.filter(pk__in=ids).exclude(status=status).values_list("status", "error_code")[:5])
    raise SystemExit(f"timed out waiting for {status}: {bad}")


def _durations(kind: str) -> tuple[list[float], int]:
    from apps.operations.models import Operation

    ops = Operation.objects.filter(kind=kind)
    done = [(o.finished_at - o.created_at).total_seconds() for o in ops.filter(status="succeeded")]
    return done, ops.exclude(status="succeeded").count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--volumes", type=int, default=200)
    parser.add_argument("--instances", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()
    db = os.environ.get("BENCH_DATABASE_URL", DEFAULT_DB)
    _recreate_database(db)
    env = {**os.environ, "DATABASE_URL": db, "DJANGO_SETTINGS_MODULE": "gpucloud.settings",
           "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/7"), "COMPUTE_SEED_DIR": "/tmp/gc-bench",
           "COMPUTE_UEFI": "true", "STORAGE_SHARED_POOL_URI": URI,
           "SECRET_KEY": os.environ.get("SECRET_KEY") or secrets.token_urlsafe(50)}  # signs nothing that outlives the run
    os.environ.update(env)
    world = _prepare(hosts=(args.instances + 7) // 8)
    from apps.storage.models import VolumeType

    # a test-driver pool holds 100 GiB (libvirt's default for it, whatever the pool XML says), and its 1-GiB
    # volumes are fully allocated: one volume type, with its own pool, per 100 volumes
    vtypes = [VolumeType.objects.create(name=f"bench-ssd-{n}", pool=f"bench-ssd-{n}", pool_kind="dir",
                                        pool_target_path=f"/var/lib/gpucloud/bench-ssd-{n}")
              for n in range(math.ceil(args.volumes / TEST_POOL_GIB))]
    venv = ROOT / ".venv" / "bin"
    subprocess.run([str(venv / "celery"), "-A", "gpucloud", "purge", "-f", "-Q", "provisioning"], cwd=ROOT, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    port = _free_port()
    procs = [_start([str(venv / "gunicorn"), "gpucloud.wsgi:application", "--bind", f"127.0.0.1:{port}",
                     "--workers", "2", "--threads", "2", "--log-level", "warning"], env),
             _start([str(venv / "celery"), "-A", "gpucloud", "worker", "-Q", "provisioning", "--pool", "threads",
                     "--concurrency", str(args.concurrency), "--loglevel", "warning"], env)]
    errors, api = 0, []
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_http(base)
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {world['token']}"

        def post(path: str, body: dict, key: str) -> dict | None:
            nonlocal errors
            t0 = time.perf_counter()
            r = session.post(f"{base}/api/v1/{path}", json=body, headers={"Idempotency-Key": key})
            api.append((time.perf_counter() - t0) * 1000)
            if r.status_code != 202:
                errors += 1
                print(f"{path}: {r.status_code} {r.text[:300]}", file=sys.stderr)
                return None
            return r.json()

        instances = [r["instance"]["id"] for i in range(args.instances)
                     if (r := post("instances/", {"project": world["project"], "name": f"vm-{i}",
                                                  "flavor": world["flavor"], "image": world["image"]}, f"i-{i}"))]
        api.clear()  # the figures are the volumes'
        _wait("compute.Instance", instances, "active", args.timeout)
        volumes = [r["volume"]["id"] for i in range(args.volumes)
                   if (r := post("volumes/", {"project": world["project"], "name": f"vol-{i}",
                                              "volume_type": str(vtypes[i % len(vtypes)].pk), "size_gib": 1},
                                             f"v-{i}"))]
        all_available = _wait("storage.Volume", volumes, "available", args.timeout)
        attached = [vid for n, vid in enumerate(volumes)
                    if post(f"volumes/{vid}/attach/", {"instance": instances[n % len(instances)]}, f"a-{n}")]
        all_attached = _wait("storage.Volume", attached, "in-use", args.timeout)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
    creates, create_failed = _durations("volume.create")
    attaches, attach_failed = _durations("volume.attach")
    from apps.storage.models import VolumeAttachment

    missing = len(attached) - VolumeAttachment.objects.filter(volume_id__in=attached, status="attached").count()
    errors += create_failed + attach_failed + missing
    result = {"volumes": args.volumes, "instances": args.instances, "driver": f"libvirt {URI}",
              "create_p50_s": round(_pct(creates, 50), 3), "create_p99_s": round(_pct(creates, 99), 3),
              "attach_p50_s": round(_pct(attaches, 50), 3), "attach_p99_s": round(_pct(attaches, 99), 3),
              "api_p50_ms": round(_pct(api, 50), 1), "api_p99_ms": round(_pct(api, 99), 1),
              "all_available_s": round(all_available, 2), "all_attached_s": round(all_attached, 2), "errors": errors}
    print(f"{len(creates)} volumes on libvirt {URI} (no hot-plug there: redefine + power cycle; QEMU hot-plug is "
          f"the contract tests'): create->available p50 {result['create_p50_s']} s, p99 {result['create_p99_s']} s; "
          f"{len(attaches)} attaches to {args.instances} instances: attach->attached p50 {result['attach_p50_s']} s, "
          f"p99 {result['attach_p99_s']} s; errors {errors}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
