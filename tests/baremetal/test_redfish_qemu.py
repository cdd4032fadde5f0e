"""Ironic's `redfish` hardware type against a real BMC emulation: sushy-tools (its libvirt driver) in front of a
real QEMU VM (TCG, 128 MiB, an 8 MiB raw disk, an empty SATA CD-ROM, one NIC) of a private libvirtd session
daemon, and a real standalone Ironic, all driven through the product's `IronicDriver`: enroll, manage (Ironic
checks the BMC), provide; power on and off read back from libvirt; the boot device set and read back from the
domain; deploy → active and undeploy → available, with the virtual media inserted and ejected; the erase read-back
on the VM's disk.

What runs and what does not, exactly. This machine has no Ironic Python Agent (IPA) ramdisk, so:
- the deploy uses Ironic's `ramdisk` deploy interface with `redfish-virtual-media` boot: Ironic powers the VM
  off, publishes the boot ISO over HTTP, inserts it as the VM's virtual CD through Redfish, sets the boot device
  and powers the VM on. No image is written to the disk (the ISO is 1 MiB of zeros, so the VM's firmware finds
  nothing to boot and keeps running; nothing inside the VM is checked).
- automated cleaning needs IPA (Ironic boots it to erase the disks), so the node is enrolled with its
  `automated_clean` false and the receipt's cleaning step must say `skipped` (read back from Ironic's history);
- the disk is therefore not erased by Ironic: the product's read-back finds the pattern written before the
  deploy and fails the step, as it must. The test then zeroes the image itself with qemu-io (standing in for
  IPA's `erase_devices`, which cannot run here) and the read-back succeeds.

Ironic deploys in UEFI mode, so the emulator switches the domain to OVMF. Marked slow (a few minutes: each
Redfish power change costs Ironic ~8-10 s of polling). Skipped with the reason when libvirtd, QEMU, qemu-utils,
OVMF, Ironic's venv (`make ironic`) or sushy-tools' venv (var/sushy-tools/venv, `make sushy-tools`) is missing.
"""
from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest
import requests

from apps.baremetal.drivers.base import DeployRequest, EnrollRequest, PowerAction
from apps.baremetal.drivers.disk import QemuImageDisk
from apps.baremetal.drivers.ironic import IronicDriver
from apps.baremetal.services.erase import erase_read_back
from apps.baremetal.services.receipts import cleaning_evidence, history_mark
from tests.storage.libvirt_daemon import LIBVIRTD, QEMU, session_daemon_start, session_daemon_stop

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
IRONIC_VENV = ROOT / "var" / "ironic" / "venv"
SUSHY = ROOT / "var" / "sushy-tools" / "venv" / "bin" / "sushy-emulator"
SCRIPT = ROOT / "scripts" / "ironic-standalone.sh"
MAC = "52:54:00:6b:3a:01"
DISK_BYTES = 8 * 1024 * 1024
POWER_S, DEPLOY_S = 120.0, 300.0
OVMF = "/usr/share/OVMF/OVMF_CODE.secboot.fd"  # sushy-tools' default UEFI loader for x86_64


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with {proc.returncode}")
        try:
            if requests.get(url, timeout=2).status_code < 500:
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    pytest.fail(f"{what} did not answer at {url} in {timeout} s")


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _domain_xml(name: str, vm_uuid: str, disk: Path) -> str:
    return f"""<domain type='qemu'>
  <name>{name}</name><uuid>{vm_uuid}</uuid>
  <memory unit='MiB'>128</memory><vcpu>1</vcpu>
  <os><type arch='x86_64' machine='q35'>hvm</type><boot dev='hd'/></os>
  <features><acpi/></features>
  <devices>
    <emulator>{QEMU}</emulator>
    <disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='{disk}'/>
      <target dev='sda' bus='sata'/></disk>
    <disk type='file' device='cdrom'><driver name='qemu' type='raw'/><target dev='sdb' bus='sata'/><readonly/></disk>
    <interface type='user'><mac address='{MAC}'/><model type='e1000'/></interface>
    <serial type='pty'/>
  </devices>
</domain>"""


def _missing() -> str:
    for path, why in ((LIBVIRTD, "libvirtd is not installed (Debian package libvirt-daemon)"),
                      (QEMU, "qemu-system-x86_64 is not installed (Debian package qemu-system-x86)"),
                      (IRONIC_VENV / "bin" / "ironic", "Ironic is not installed in var/ironic/venv (make ironic)"),
                      (SUSHY, "sushy-tools is not installed in var/sushy-tools/venv (make sushy-tools)")):
        if not Path(path).exists():
            return why
    if not (shutil.which("qemu-img") and shutil.which("qemu-io")):
        return "qemu-img and qemu-io are not installed (Debian package qemu-utils)"
    if not Path(OVMF).exists():  # Ironic deploys in UEFI mode; the emulator points the domain at this firmware
        return f"{OVMF} is missing (Debian package ovmf)"
    return ""


@pytest.fixture(scope="module")
def lab():
    """libvirtd (private session daemon) + a defined QEMU VM with a patterned disk + sushy-tools over it + an HTTP
    server for Ironic's http_root + a standalone Ironic with the redfish type; all stopped at the end."""
    reason = _missing()
    if reason:
        pytest.skip(reason)
    import libvirt

    daemon, root, sock = session_daemon_start()
    uri = f"qemu+unix:///session?socket={sock}"
    vm_uuid, name = str(uuid.uuid4()), f"gc-bm-{uuid.uuid4().hex[:6]}"
    procs: list[subprocess.Popen] = []
    ironic_dir = Path(tempfile.mkdtemp(prefix="gc-ironic-rf-"))
    conn = dom = None
    try:
        disk = root / "pools" / "disk.raw"
        subprocess.run(["qemu-img", "create", "-f", "raw", str(disk), str(DISK_BYTES)], check=True,
                       capture_output=True)
        subprocess.run(["qemu-io", "-f", "raw", "-c", f"write -P 0xa5 0 {DISK_BYTES}", str(disk)], check=True,
                       capture_output=True)  # the tenant's data
        if os.geteuid() == 0:  # QEMU runs as the daemon's user
            nobody = pwd.getpwnam("nobody")
            os.chown(disk, nobody.pw_uid, nobody.pw_gid)
        conn = libvirt.open(uri)
        pool = conn.storagePoolDefineXML(f"<pool type='dir'><name>default</name><target><path>{root}/pools"
                                         "</path></target></pool>")
        pool.create()
        dom = conn.defineXML(_domain_xml(name, vm_uuid, disk))

        sushy_port, http_port, ironic_port = _free_port(), _free_port(), _free_port()
        conf = root / "sushy.conf"
        conf.write_text(f"SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'\nSUSHY_EMULATOR_LISTEN_PORT = {sushy_port}\n"
                        f"SUSHY_EMULATOR_STATE_DIR = '{root}/sushy-state'\nSUSHY_EMULATOR_LIBVIRT_URI = '{uri}'\n"
                        f"SUSHY_EMULATOR_STORAGE_POOL = 'default'\nSUSHY_EMULATOR_ALLOWED_INSTANCES = ['{vm_uuid}']\n")
        sushy_log = open(root / "sushy.log", "w")  # noqa: SIM115 - closed with the process
        procs.append(subprocess.Popen([str(SUSHY), "--config", str(conf)], stdout=sushy_log,
                                      stderr=subprocess.STDOUT))
        bmc = f"http://127.0.0.1:{sushy_port}"
        _wait_http(f"{bmc}/redfish/v1/Systems/{vm_uuid}", procs[-1], "sushy-emulator")

        httpboot = ironic_dir / "httpboot"
        httpboot.mkdir(parents=True)
        (httpboot / "boot.iso").write_bytes(b"\0" * (1024 * 1024))
        procs.append(subprocess.Popen([sys.executable, "-m", "http.server", str(http_port), "--bind", "127.0.0.1",
                                       "--directory", str(httpboot)], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
        http = f"http://127.0.0.1:{http_port}"
        _wait_http(f"{http}/boot.iso", procs[-1], "the HTTP server")

        started = subprocess.run([str(SCRIPT), "start", str(ironic_dir), str(ironic_port)], capture_output=True,
                                 text=True, timeout=240, env={**os.environ, "IRONIC_HTTP_URL": http})
        if started.returncode != 0:
            pytest.fail(f"Ironic did not start: {started.stderr[-3000:]}")
        drv = IronicDriver(endpoint=started.stdout.strip(), poll_interval=1.0)
        yield SimpleNamespace(conn=conn, dom=dom, disk=disk, bmc=bmc, http=http, vm_uuid=vm_uuid, drv=drv,
                              ironic_dir=ironic_dir)
        drv.close()
    finally:
        try:
            subprocess.run([str(SCRIPT), "stop", str(ironic_dir)], timeout=30, check=False)
            for proc in reversed(procs):
                _stop(proc)
            if dom is not None:
                if dom.isActive():
                    dom.destroy()
                # Ironic asked for UEFI boot, so the domain has an NVRAM file now
                dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
            if conn is not None:
                conn.close()
        finally:
            session_daemon_stop(daemon, root)
            shutil.rmtree(ironic_dir, ignore_errors=True)


def _redfish(lab, path: str) -> dict:
    return requests.get(f"{lab.bmc}{path}", timeout=10).json()


def _cd(lab) -> dict:
    system = _redfish(lab, f"/redfish/v1/Systems/{lab.vm_uuid}")
    media = _redfish(lab, system["VirtualMedia"]["@odata.id"])["Members"]
    return next(_redfish(lab, m["@odata.id"]) for m in media if m["@odata.id"].endswith("/Cd"))


def _boot_dev(lab) -> str:
    """The domain's first boot device as libvirt names it: `<os><boot dev=.../>`, or the device carrying
    `<boot order='1'/>` (the emulator uses either form): network, hd, cdrom."""
    xml = ET.fromstring(lab.dom.XMLDesc(0))
    boot = xml.find("os/boot")
    if boot is not None:
        return boot.get("dev")
    for dev in xml.find("devices"):
        if dev.find("boot") is not None and dev.find("boot").get("order") == "1":
            return "network" if dev.tag == "interface" else "cdrom" if dev.get("device") == "cdrom" else "hd"
    return ""


def _cdrom_source(lab) -> str | None:
    for d in ET.fromstring(lab.dom.XMLDesc(0)).iter("disk"):
        if d.get("device") == "cdrom":
            src = d.find("source")
            return None if src is None else (src.get("file") or src.get("volume") or "")
    return None


def test_redfish_node_on_sushy_tools_and_a_qemu_vm(lab):
    drv = lab.drv
    # enroll through the product's driver: Ironic's redfish type, ramdisk deploy, virtual media boot
    node = drv.enroll(EnrollRequest(
        name="gc-redfish-01", driver="redfish",
        driver_info={"redfish_address": lab.bmc, "redfish_system_id": f"/redfish/v1/Systems/{lab.vm_uuid}",
                     "redfish_username": "admin", "redfish_password": "password"},
        interfaces={"deploy": "ramdisk", "boot": "redfish-virtual-media"},
        properties={"cpus": 1, "memory_mb": 128, "cpu_arch": "x86_64"}, macs=(MAC,),
        automated_clean=False))  # no IPA ramdisk here to clean with (module docstring)
    assert (node.driver, node.state.provision, node.macs, node.automated_clean) == ("redfish", "enroll", (MAC,),
                                                                                    False)
    assert drv.manage(node.id, timeout=POWER_S).state.provision == "manageable"  # Ironic reached the BMC
    assert drv.provide(node.id, timeout=POWER_S).state.provision == "available"

    # power, read back from the VM itself
    assert drv.set_power(node.id, PowerAction.ON, timeout=POWER_S).state.power == "on"
    assert lab.dom.isActive() == 1
    assert drv.set_power(node.id, PowerAction.OFF, timeout=POWER_S).state.power == "off"
    assert lab.dom.isActive() == 0

    # boot device, read back from Ironic, the BMC and the domain definition
    for device, libvirt_dev, redfish_target in (("pxe", "network", "Pxe"), ("disk", "hd", "Hdd")):
        drv.api.set_node_boot_device(node.id, device, persistent=True)
        assert drv.api.get_node_boot_device(node.id)["boot_device"] == device
        assert _redfish(lab, f"/redfish/v1/Systems/{lab.vm_uuid}")["Boot"]["BootSourceOverrideTarget"] == \
            redfish_target
        assert _boot_dev(lab) == libvirt_dev
    assert _cd(lab)["Inserted"] is False and _cdrom_source(lab) is None

    # deploy → active: the boot ISO inserted as virtual media, the VM booted from it
    instance = str(uuid.uuid4())
    active = drv.deploy(node.id, DeployRequest(instance_id=instance, boot_iso=f"{lab.http}/boot.iso"),
                        timeout=DEPLOY_S)
    assert (active.state.provision, active.state.power, active.instance_id) == ("active", "on", instance)
    assert lab.dom.isActive() == 1
    cd = _cd(lab)
    assert cd["Inserted"] is True and cd["Image"], cd
    assert _cdrom_source(lab)  # the ISO, uploaded into the pool by the emulator, is the VM's CD-ROM
    assert _boot_dev(lab) == "cdrom"

    # undeploy → available: powered off, virtual media ejected
    mark = history_mark(drv.history(node.id))
    done = drv.undeploy(node.id, timeout=DEPLOY_S)
    assert (done.state.provision, done.state.power, done.instance_id) == ("available", "off", "")
    assert lab.dom.isActive() == 0
    assert _cd(lab)["Inserted"] is False and _cdrom_source(lab) is None

    # the receipt's cleaning step, read back from Ironic's history: skipped, never claimed
    step = cleaning_evidence(node=SimpleNamespace(driver="redfish"), seen=done, events=drv.history(node.id),
                             mark=mark)
    assert (step["result"], step["how"]) == ("not_run", "skipped: automated cleaning is disabled for this node")

    # erase read-back on the VM's disk: nothing erased it, so the tenant's pattern is found and the step fails
    disk = QemuImageDisk(str(lab.disk), fmt="raw")
    left = erase_read_back(disk, where="the VM's disk")
    assert (left["result"], left["how"], left["sampled_blocks"]) == ("failed", "executed", 16)
    assert len(left["blocks_with_data"]) == 16 and "16 of 16 sampled blocks" in left["detail"]
    # zeroed the way IPA's erase_devices would (it cannot run here): the read-back now passes
    subprocess.run(["qemu-io", "-f", "raw", "-c", f"write -z 0 {DISK_BYTES}", str(lab.disk)], check=True,
                   capture_output=True)
    erased = erase_read_back(disk, where="the VM's disk")
    assert (erased["result"], erased["how"], erased["blocks_with_data"]) == ("succeeded", "executed", [])

    drv.set_maintenance(node.id, True, "test over")
    drv.delete(node.id)
