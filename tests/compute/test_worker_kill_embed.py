"""Acceptance: a Celery worker is SIGKILLed in the middle of an instance create against real QEMU (TCG, through
`qemu:///embed`, not the test driver whose domains die with the process); a new worker resumes the operation, the
instance becomes active with exactly one domain and no leaked allocation.

The first worker is killed while it runs the `define` step (the first define on a fresh embed root probes QEMU's
capabilities for seconds). Skipped only when QEMU or libvirt's QEMU driver is missing.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection, transaction

from apps.compute.models import Flavor, Instance
from apps.compute.services.instances import instance_create
from apps.core.clock import now
from apps.operations.models import Operation
from apps.scheduling.models import Allocation
from tests.drivers.contract.conftest import QEMU, _ensure_libvirt_qemu_user, _qemu_driver_installed

from .conftest import gpu_host

BROKER_DB = 13


def _env(root: Path) -> dict:
    db = connection.settings_dict
    url = f"postgres://{db.get('USER') or 'root'}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    return {**os.environ, "DATABASE_URL": url, "CELERY_BROKER_URL": f"redis://127.0.0.1:6379/{BROKER_DB}",
            "CELERY_RESULT_BACKEND": f"redis://127.0.0.1:6379/{BROKER_DB}", "PYTHONPATH": str(settings.BASE_DIR),
            "COMPUTE_VIRT_TYPE": "qemu", "COMPUTE_UEFI": "false", "COMPUTE_SEED_DIR": str(root / "seeds")}


def _worker(env: dict, log: Path, name: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "celery", "-A", "gpucloud", "worker", "--pool", "solo", "-Q", "provisioning",
           "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "INFO"]
    return subprocess.Popen(cmd, env=env, cwd=settings.BASE_DIR, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


_PROBE = """
import sys
from apps.compute.drivers.libvirt.connection import get_connection
conn = get_connection(sys.argv[1])
for d in conn.listAllDomains(0):
    print(d.UUIDString())
    if sys.argv[2] == "cleanup":
        try:
            d.destroy()
        except Exception:
            pass  # not running
        d.undefine()
"""


def _embed(uri: str, action: str) -> list[str]:
    """List (and with `cleanup` remove) the embed root's domains in a child process once the workers are gone:
    one process owns an embed root at a time, and a process can open only one embed root in its life."""
    out = subprocess.run([sys.executable, "-c", _PROBE, uri, action], cwd=settings.BASE_DIR, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(settings.BASE_DIR)})
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_create_resumes_after_worker_sigkill_on_qemu(world, tmp_path):
    if not Path(QEMU).exists() or not _qemu_driver_installed():
        pytest.skip("qemu-system-x86_64 or libvirt's QEMU driver is not installed")
    if _ensure_libvirt_qemu_user():
        pytest.skip("user libvirt-qemu is missing and we are not root to create it")
    root = Path(tempfile.mkdtemp(prefix="gc-kill-", dir="/tmp"))  # QEMU's monitor socket path must stay short
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "qemu.conf").write_text('stdio_handler = "file"\nuser = "root"\ngroup = "root"\n'
                                            'security_driver = "none"\n')
    uri = f"qemu:///embed?root={root}"
    gpu_host(uri=uri, gpus=0)
    tiny = Flavor.objects.create(name="tiny-kill", vcpus=1, memory_mib=64)
    with transaction.atomic():
        inst, op = instance_create(actor=None, project=world.project_a, name="kill-1", flavor_id=tiny.pk,
                                      image_id=world.image.pk)
        # This process runs Celery eagerly (tests/conftest.py): drop the after-commit send so that only the workers
        # run the operation (each resumes unfinished operations when it starts).
        connection.run_on_commit.clear()
    redis.Redis(port=6379, db=BROKER_DB).flushdb()
    env = _env(root)

    first = _worker(env, tmp_path / "first.log", "first")
    try:
        _wait(lambda: Operation.objects.get(pk=op.pk).step == "define", 120, "the define step")
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
    op.refresh_from_db()
    assert (op.status, op.step) == ("running", "define"), (tmp_path / "first.log").read_text()[-2000:]
    assert Instance.objects.get(pk=inst.pk).status == "provisioning"

    second = _worker(env, tmp_path / "second.log", "second")
    try:
        _wait(lambda: Operation.objects.get(pk=op.pk).status in ("succeeded", "failed"), 180, "the create")
    finally:
        os.killpg(second.pid, signal.SIGTERM)
        second.wait(30)
    try:
        op.refresh_from_db()
        inst.refresh_from_db()
        assert (op.status, op.error_detail) == ("succeeded", ""), (tmp_path / "second.log").read_text()[-3000:]
        assert op.steps_done == ["place_and_claim", "attach_networks", "prepare_volumes", "prepare_devices",
                                 "wait_devices", "define", "start", "wait_running"]
        assert (inst.status, inst.observed_state) == ("active", "running")
        assert _embed(uri, "list") == [str(inst.pk)]  # exactly one domain
        live = Allocation.objects.filter(period__contains=now())
        assert sorted((a.consumer_id, a.resource_class, a.amount) for a in live) == [
            (inst.pk, "memory_mib", 64), (inst.pk, "vcpu", 1)]
    finally:
        _embed(uri, "cleanup")
        shutil.rmtree(root, ignore_errors=True)
