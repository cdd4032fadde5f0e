"""Guest firmware: UEFI without Secure Boot by default (so a DKMS-built, unsigned NVIDIA module loads), Secure Boot
when the image asks for it. The XML is checked by parsing it; a slow test boots the product's XML on real QEMU
(TCG, `qemu:///embed`) with the host's OVMF and reads the firmware's output from the serial log."""
from __future__ import annotations

import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from apps.compute.drivers.base import DomainSpec
from apps.compute.drivers.libvirt.xml import domain_xml
from apps.compute.models import Instance
from apps.compute.services.hypervisor import driver_for_host, forget_drivers
from apps.core.drivers import DriverError
from tests.drivers.contract.conftest import qemu_embed_uri  # noqa: F401  (session fixture)

from .conftest import create_body, drive, gpu_host

FIRMWARE_DESCRIPTORS = Path("/usr/share/qemu/firmware")


def _features(root: ET.Element) -> dict[str, str]:
    return {f.get("name"): f.get("enabled") for f in root.iterfind("os/firmware/feature")}


def test_default_is_q35_uefi_without_secure_boot():
    root = ET.fromstring(domain_xml(DomainSpec(uuid=uuid.uuid4(), vcpus=2, memory_mib=2048)))
    os_el = root.find("os")
    assert (os_el.get("firmware"), os_el.find("type").get("machine")) == ("efi", "q35")
    assert _features(root) == {"secure-boot": "no", "enrolled-keys": "no"}
    assert os_el.find("loader") is None and root.find("features/smm") is None


def test_secure_boot_enrolls_keys_and_turns_on_smm():
    root = ET.fromstring(domain_xml(DomainSpec(uuid=uuid.uuid4(), vcpus=2, memory_mib=2048, secure_boot=True)))
    assert _features(root) == {"secure-boot": "yes", "enrolled-keys": "yes"}
    assert root.find("os/loader").get("secure") == "yes"
    assert root.find("features/smm").get("state") == "on"


def test_bios_guest_has_no_firmware_features_and_secure_boot_needs_uefi():
    root = ET.fromstring(domain_xml(DomainSpec(uuid=uuid.uuid4(), vcpus=1, memory_mib=64, uefi=False)))
    assert root.find("os").get("firmware") is None and root.find("os/firmware") is None
    with pytest.raises(DriverError) as exc:
        domain_xml(DomainSpec(uuid=uuid.uuid4(), vcpus=1, memory_mib=64, uefi=False, secure_boot=True))
    assert exc.value.code == "secure_boot_needs_uefi"


@pytest.mark.django_db
def test_the_image_decides_secure_boot(world):
    host = gpu_host(gpus=0)
    r = world.staff_client.post("/api/v1/images/", {
        "name": "rhel-9-signed", "os": "rhel", "source_url": "https://x.test/r.img", "checksum": "sha256:" + "1" * 64,
        "secure_boot": True}, format="json")
    assert (r.status_code, r.json()["secure_boot"]) == (201, True)
    assert world.client_a.get(f"/api/v1/images/{world.image.pk}/").json()["secure_boot"] is False
    specs = {}
    for name, image in (("plain", str(world.image.pk)), ("signed", r.json()["id"])):
        resp = world.client_a.post("/api/v1/instances/", create_body(world, world.cpu, name=name, image=image),
                                   format="json")
        assert drive(resp.data["operation"]["id"]).status == "succeeded"
        specs[name] = driver_for_host(host).host.specs[uuid.UUID(resp.data["instance"]["id"])]
    assert (specs["plain"].uefi, specs["plain"].secure_boot) == (True, False)
    assert (specs["signed"].uefi, specs["signed"].secure_boot) == (True, True)


@pytest.mark.slow
@pytest.mark.django_db
def test_uefi_guest_reaches_the_firmware_on_qemu(world, qemu_embed_uri, settings, monkeypatch):  # noqa: F811
    """The create's own XML, with firmware autoselection, starts under TCG and OVMF's boot manager writes to the
    serial log (measured: about 15-20 s on the 2-core development machine)."""
    if not any(FIRMWARE_DESCRIPTORS.glob("*edk2-x86_64*.json")):
        pytest.skip("no OVMF firmware descriptor (Debian package ovmf)")
    settings.DRIVERS = {"compute": "apps.compute.drivers.libvirt:LibvirtDriver"}
    monkeypatch.setenv("COMPUTE_VIRT_TYPE", "qemu")
    forget_drivers()
    try:
        host = gpu_host(uri=qemu_embed_uri, gpus=0)
        tiny = world.cpu.__class__.objects.create(name="tiny-uefi", vcpus=1, memory_mib=256)
        resp = world.client_a.post("/api/v1/instances/", create_body(world, tiny, name="uefi-1"), format="json")
        op = drive(resp.data["operation"]["id"], max_steps=200)
        inst = Instance.objects.get(pk=resp.data["instance"]["id"])
        assert (op.status, op.error_detail, inst.status) == ("succeeded", "", "active")
        drv = driver_for_host(host)
        live = ET.fromstring(drv.domain_xml_get(inst.pk))
        loader = live.find("os/loader")
        assert loader is not None and "OVMF" in loader.text and loader.get("secure") != "yes"
        log, deadline = "", time.monotonic() + 60
        while "BdsDxe" not in log and time.monotonic() < deadline:
            time.sleep(0.5)
            log = drv.console_log(inst.pk)
        assert "BdsDxe" in log  # OVMF's boot device selection ran
        drv.domain_delete(inst.pk)
    finally:
        forget_drivers()
