"""The reconciler against the fake driver and against libvirt's test driver."""
from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from apps.audit.models import AuditEvent
from apps.compute.drivers.base import DomainSpec
from apps.compute.models import Instance
from apps.compute.services.hypervisor import driver_for_host, forget_drivers
from apps.compute.services.reconcile import instances_reconcile
from apps.compute.tasks import instances_reconcile_task
from apps.inventory.models import Host

from .conftest import create_body, drive, gpu_host
from .test_instance_lifecycle import _live_allocations

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _clear_cache():
    from django.core.cache import cache

    cache.clear()


def _active(world, host, name="vm-1"):
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.gpu1, name=name), format="json")
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    return Instance.objects.get(pk=resp.data["instance"]["id"])


def test_vanished_domain_errors_after_grace_and_releases(world, monkeypatch):
    host = gpu_host(gpus=2)
    inst = _active(world, host)
    driver_for_host(host).domain_delete(inst.pk)  # gone behind our back
    monkeypatch.setenv("COMPUTE_VANISHED_GRACE_S", "3600")
    report = instances_reconcile()
    inst.refresh_from_db()
    assert (report.missing, inst.status, inst.observed_state) == (1, "active", "missing")
    assert instances_reconcile().errored == 0  # still inside the grace period
    monkeypatch.setenv("COMPUTE_VANISHED_GRACE_S", "0")
    assert instances_reconcile().errored == 1
    inst.refresh_from_db()
    assert (inst.status, inst.error_code) == ("error", "domain_vanished")
    assert _live_allocations(inst.pk) == []


def test_guest_power_off_becomes_stopped_with_gpu_held(world):
    host = gpu_host(gpus=2)
    inst = _active(world, host)
    driver_for_host(host).domain_stop(inst.pk, hard=True)
    assert instances_reconcile_task()["stopped"] == 1
    inst.refresh_from_db()
    assert (inst.status, inst.observed_state) == ("stopped", "shutoff")
    assert ("gpu", 1) in _live_allocations(inst.pk)


def test_unknown_domain_is_reported_once_and_kept(world):
    host = gpu_host(gpus=2)
    drv = driver_for_host(host)
    stranger = DomainSpec(uuid=uuid.uuid4(), vcpus=1, memory_mib=512)
    drv.domain_define(stranger)
    first, second = instances_reconcile(), instances_reconcile()
    assert first.unknown == second.unknown == [str(stranger.uuid)]
    events = AuditEvent.objects.filter(action="compute.reconcile.unknown_domain")
    assert [e.after["domain_uuid"] for e in events] == [str(stranger.uuid)]
    assert drv.domain_get(stranger.uuid).uuid == stranger.uuid  # never deleted


def test_unreachable_host_is_skipped(world, fake_driver):
    host = gpu_host(gpus=2)
    inst = _active(world, host)
    fake_driver.unreachable.add(host.libvirt_uri)
    report = instances_reconcile()
    inst.refresh_from_db()
    assert (report.unreachable, inst.status, inst.observed_state) == ([host.libvirt_uri], "active", "running")


def test_libvirt_test_driver_fleet(world, settings, tmp_path, monkeypatch):
    """Two hosts on one libvirt test-driver URI (like the demo fleet): our domain is created, observed and not
    mistaken for an unknown one; the seed ISO lands in COMPUTE_SEED_DIR."""
    monkeypatch.setenv("COMPUTE_SEED_DIR", str(tmp_path / "seeds"))
    settings.DRIVERS = {"compute": "apps.compute.drivers.libvirt:LibvirtDriver"}
    forget_drivers()
    node = tmp_path / "node.xml"
    shutil.copy(Path(__file__).parents[1] / "drivers" / "contract" / "data" / "gpu-node.xml", node)
    uri = f"test://{node}"
    h1, h2 = gpu_host(uri=uri, gpus=2), gpu_host(uri=uri, gpus=2)
    inst = _active(world, h1)
    Instance.objects.filter(pk=inst.pk).update(observed_state="")
    report = instances_reconcile()
    assert (report.uris, report.observed, report.unknown) == (1, 1, [])
    assert Instance.objects.get(pk=inst.pk).observed_state == "running"
    assert Host.objects.filter(pk__in=[h1.pk, h2.pk], state="available").count() == 2
    assert [p.name for p in (tmp_path / "seeds").iterdir()] == [f"{inst.pk}-seed.iso"]
    from apps.compute.drivers.libvirt.connection import drop_connection

    drop_connection(uri)
    forget_drivers()
