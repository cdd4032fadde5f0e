"""Acceptance: a Celery worker is SIGKILLed in the middle of a volume attach on real libvirt (the private
libvirtd of `libvirt_daemon`, a running QEMU guest): after the disk is in the domain, before the step commits.
A new worker resumes the operation: one attachment, the volume `in-use`, and exactly one disk for the volume
in the live and the persistent definition.

The worker is held at that point deterministically: the test holds a SHARE lock on the attachments table, which
lets the step lock its rows (`SELECT ... FOR UPDATE`) and call libvirt but blocks its first write after the
attach (`UPDATE` of the attachment row), so the disk is attached and nothing is committed when the kill comes.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
import redis
from django.conf import settings
from django.db import connection, transaction

from apps.compute.drivers.base import DomainSpec, PowerState
from apps.compute.drivers.libvirt import LibvirtDriver
from apps.operations.models import Operation
from apps.storage.drivers import forget_drivers, get_driver
from apps.storage.drivers.base import disk_serial
from apps.storage.models import Volume, VolumeAttachment, VolumeType
from apps.storage.services.attachments import volume_attach

from .conftest import drive, instance, volume_body
from .libvirt_daemon import QEMU, libvirt_session  # noqa: F401  (session fixture)

BROKER_DB = 12


def _env(uri: str) -> dict:
    db = connection.settings_dict
    url = f"postgres://{db.get('USER') or 'root'}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    return {**os.environ, "DATABASE_URL": url, "CELERY_BROKER_URL": f"redis://127.0.0.1:6379/{BROKER_DB}",
            "CELERY_RESULT_BACKEND": f"redis://127.0.0.1:6379/{BROKER_DB}", "PYTHONPATH": str(settings.BASE_DIR),
            "STORAGE_SHARED_POOL_URI": uri}


def _worker(env: dict, log: Path, name: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "celery", "-A", "gpucloud", "worker", "--pool", "solo", "-Q", "provisioning",
           "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "INFO"]
    return subprocess.Popen(cmd, env=env, cwd=settings.BASE_DIR, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _wait(predicate, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}: {log.read_text()[-3000:] if log.exists() else ''}")


def _dsn() -> str:
    db = connection.settings_dict
    return (f"host={db.get('HOST') or '127.0.0.1'} port={db.get('PORT') or 5432} dbname={db['NAME']}"
            + (f" user={db['USER']}" if db.get("USER") else ""))


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_attach_resumes_after_worker_sigkill_with_one_attachment_and_one_disk(world, tmp_path, settings,
                                                                              monkeypatch, libvirt_session):  # noqa: F811
    uri, root = libvirt_session
    settings.DRIVERS = {**getattr(settings, "DRIVERS", {}),
                        "storage": "apps.storage.drivers.libvirt:LibvirtStorageDriver",
                        "compute": "apps.compute.drivers.libvirt:LibvirtDriver"}
    monkeypatch.setenv("STORAGE_SHARED_POOL_URI", uri)
    forget_drivers()
    pool, target = "kill-pool", str(Path(root, "pools", "kill-pool"))
    VolumeType.objects.filter(pk=world.ssd.pk).update(pool=pool, pool_target_path=target)
    host = world.instance_a.host
    host.libvirt_uri = uri
    host.save(update_fields=["libvirt_uri"])
    inst = instance(world.project_a, "vm-kill", status="active", host=host)
    compute = LibvirtDriver(uri, seed_dir=str(Path(root, "seeds")))
    compute.domain_define(DomainSpec(uuid=inst.pk, vcpus=1, memory_mib=64, project_id="p", machine="pc", uefi=False,
                                     virt_type="qemu", emulator=QEMU))
    assert compute.domain_start(inst.pk).power_state == PowerState.RUNNING
    drv = get_driver(uri)
    try:
        created = world.client_a.post("/api/v1/volumes/", volume_body(world, "data", 1), format="json")
        assert drive(created.json()["operation"]["id"]).status == "succeeded"
        vol = Volume.objects.get(pk=created.json()["volume"]["id"])
        with transaction.atomic():
            _att, op = volume_attach(actor=None, volume=vol, instance=inst)
            # This process runs Celery eagerly (tests/conftest.py): only the workers run the operation
            connection.run_on_commit.clear()
        redis.Redis(port=6379, db=BROKER_DB).flushdb()
        env = _env(uri)

        def serials() -> list[str]:
            return [d.serial for d in drv.attached_disks(str(inst.pk)) if d.serial == disk_serial(vol.pk)]

        holder = psycopg.connect(_dsn(), autocommit=False)
        holder.execute("LOCK TABLE storage_volumeattachment IN SHARE MODE")
        first = _worker(env, tmp_path / "first.log", "first")
        try:
            _wait(lambda: serials() != [], 120, "the disk in the domain", tmp_path / "first.log")
        finally:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(10)
            holder.rollback()
            holder.close()
        op.refresh_from_db()
        # nothing of the step committed: the operation is where it was, the disk is in the domain
        assert (op.status, op.step, op.steps_done, Volume.objects.get(pk=vol.pk).status) == (
            "pending", "attach", [], "attaching")
        assert list(VolumeAttachment.objects.values_list("status", flat=True)) == ["attaching"]

        second = _worker(env, tmp_path / "second.log", "second")
        try:
            _wait(lambda: Operation.objects.get(pk=op.pk).status in ("succeeded", "failed"), 120, "the attach",
                  tmp_path / "second.log")
        finally:
            os.killpg(second.pid, signal.SIGTERM)
            second.wait(30)
        op.refresh_from_db()
        assert (op.status, op.error_detail) == ("succeeded", ""), (tmp_path / "second.log").read_text()[-3000:]
        assert list(VolumeAttachment.objects.values_list("instance_id", "device", "status")) == [
            (inst.pk, "vdb", "attached")]
        assert Volume.objects.get(pk=vol.pk).status == "in-use"
        assert serials() == [disk_serial(vol.pk)]  # one disk in the running guest
        assert compute.domain_xml_get(inst.pk).count(f"<serial>{disk_serial(vol.pk)}</serial>") == 1
        compute.domain_stop(inst.pk, hard=True)
        assert serials() == [disk_serial(vol.pk)]  # and one in the persistent definition
    finally:
        from apps.compute.drivers.libvirt.connection import get_connection

        conn = get_connection(uri)
        for dom in conn.listAllDomains(0):
            if dom.isActive():
                dom.destroy()
            dom.undefine()
        try:
            p = conn.storagePoolLookupByName(pool)
            for v in p.listAllVolumes(0):
                v.delete(0)
            p.destroy()
            p.undefine()
        except Exception:  # noqa: BLE001 - the pool was never made
            pass
        forget_drivers()
