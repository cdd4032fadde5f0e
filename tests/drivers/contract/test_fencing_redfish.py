"""The Redfish fencing driver (`apps.health.drivers.redfish`, through `sushy`) against a real Redfish service:
the sushy-tools emulator with its fake systems driver, started per module on a free port with a private state
directory. Its power changes land after a random 1 to 11 s, as a real BMC's may: `power_off` returns when the BMC
accepted the request and only `power_state` reading ``off`` says the host is off (ADR 0218).

`scripts/sushy-tools-env.sh` (`make sushy-tools`, which `make test` runs) installs the emulator into its own
virtual environment (var/sushy-tools/venv, or SUSHY_TOOLS_VENV); skipped only when it is missing."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import requests

from apps.core.drivers import DriverError, DriverTransientError
from apps.health.drivers.base import BmcTarget, FenceDriver
from apps.health.drivers.redfish import RedfishFenceDriver

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
VENV = Path(os.environ.get("SUSHY_TOOLS_VENV") or ROOT / "var" / "sushy-tools" / "venv")
SYSTEM = "27946b59-9e44-4fa7-8e91-f3527a1ef001"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def bmc():
    exe = VENV / "bin" / "sushy-emulator"
    if not exe.exists():
        pytest.skip(f"sushy-tools is not installed in {VENV} (run `make sushy-tools`)")
    root = Path(tempfile.mkdtemp(prefix="gc-sushy-"))
    port = _free_port()
    (root / "emulator.conf").write_text(
        "SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'\n"
        f"SUSHY_EMULATOR_LISTEN_PORT = {port}\n"
        "SUSHY_EMULATOR_FAKE_DRIVER = True\n"
        f"SUSHY_EMULATOR_STATE_DIR = '{root / 'state'}'\n"
        "SUSHY_EMULATOR_FAKE_SYSTEMS = [\n"
        f"    {{'uuid': '{SYSTEM}', 'name': 'gpu-node-01', 'power_state': 'On',\n"
        "      'external_notifier': False, 'nics': [{'mac': '00:5c:52:31:3a:01', 'ip': '127.0.0.11'}]}]\n"
    )
    proc = subprocess.Popen([str(exe), "--config", str(root / "emulator.conf")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if requests.get(url + "/redfish/v1/", timeout=1).ok:
                    break
            except requests.ConnectionError:
                pass
            time.sleep(0.2)
        else:
            pytest.fail("sushy-emulator did not start")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


def test_power_off_then_read_back_off(bmc):
    driver = RedfishFenceDriver(timeout_s=5)
    assert isinstance(driver, FenceDriver)
    target = BmcTarget(bmc, "admin", "password", f"/redfish/v1/Systems/{SYSTEM}")
    assert driver.power_state(target) == "on"
    driver.power_off(target)
    deadline = time.monotonic() + 30  # the emulator flips the state 1 to 11 s later
    states = []
    while time.monotonic() < deadline:
        states.append(driver.power_state(target))
        if states[-1] == "off":
            break
        time.sleep(0.5)
    assert states[-1] == "off", states
    driver.power_off(target)  # a host already off: the BMC accepts it again (the fence step is idempotent)
    assert driver.power_state(BmcTarget(bmc, "admin", "password")) == "off"  # the BMC's only system


def test_unknown_system_is_a_terminal_error(bmc):
    with pytest.raises(DriverError) as exc:
        RedfishFenceDriver(timeout_s=5).power_state(BmcTarget(bmc, "a", "b", "/redfish/v1/Systems/nope"))
    assert exc.value.code == "bmc_no_system" and not isinstance(exc.value, DriverTransientError)


def test_a_bmc_that_does_not_answer_is_transient():
    with pytest.raises(DriverTransientError) as exc:
        RedfishFenceDriver(timeout_s=2).power_off(BmcTarget(f"http://127.0.0.1:{_free_port()}", "a", "b"))
    assert exc.value.code == "bmc_unreachable"
