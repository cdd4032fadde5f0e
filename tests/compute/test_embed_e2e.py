"""The instance workflows against a real QEMU (TCG) through libvirt's daemonless `qemu:///embed` driver:
create boots a domain with a NoCloud seed to RUNNING, stop powers it off, delete removes it and its seed.
Skipped only when QEMU or libvirt's QEMU driver is missing (see tests/drivers/contract/conftest.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from apps.compute.models import Flavor, Instance
from apps.compute.services.hypervisor import driver_for_host, forget_drivers
from tests.drivers.contract.conftest import qemu_embed_uri  # noqa: F401  (session fixture)

from .conftest import create_body, drive, gpu_host

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


@pytest.fixture
def embed_env(qemu_embed_uri, settings, monkeypatch):  # noqa: F811
    settings.DRIVERS = {"compute": "apps.compute.drivers.libvirt:LibvirtDriver"}
    monkeypatch.setenv("COMPUTE_VIRT_TYPE", "qemu")
    monkeypatch.setenv("COMPUTE_UEFI", "false")  # no OVMF firmware on the CI machine
    monkeypatch.setenv("COMPUTE_STOP_GRACE_S", "0")  # SeaBIOS ignores ACPI shutdown: power off at once
    forget_drivers()
    yield qemu_embed_uri
    forget_drivers()


def test_create_stop_delete_on_qemu_tcg(world, embed_env):
    host = gpu_host(uri=embed_env, gpus=0)
    tiny = Flavor.objects.create(name="tiny", vcpus=1, memory_mib=64)
    resp = world.client_a.post("/api/v1/instances/", create_body(world, tiny, name="tcg-1"), format="json")
    op = drive(resp.data["operation"]["id"], max_steps=200)
    inst = Instance.objects.get(pk=resp.data["instance"]["id"])
    assert (op.status, op.error_detail, inst.status, inst.observed_state) == ("succeeded", "", "active", "running")
    drv = driver_for_host(host)
    xml = drv.domain_xml_get(inst.pk)
    assert f"<name>{inst.pk}</name>" in xml and "machine='pc-q35" in xml
    seed = Path(drv.seed_dir) / f"{inst.pk}-seed.iso"
    assert seed.read_bytes()[32808:32814] == b"cidata"
    serial_log = Path(drv.seed_dir) / f"{inst.pk}-serial.log"
    assert serial_log.exists()  # QEMU writes the serial console there

    stop = world.client_a.post(f"/api/v1/instances/{inst.pk}/stop/")
    assert drive(stop.data["operation"]["id"], max_steps=200).status == "succeeded"
    inst.refresh_from_db()
    assert (inst.status, inst.observed_state, drv.domain_get(inst.pk).power_state) == ("stopped", "shutoff",
                                                                                       "shutoff")
    delete = world.client_a.delete(f"/api/v1/instances/{inst.pk}/")
    assert drive(delete.data["operation"]["id"], max_steps=200).status == "succeeded"
    assert inst.pk not in {d.uuid for d in drv.domain_list()}
    assert not seed.exists() and not serial_log.exists()
