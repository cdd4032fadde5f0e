"""docs/tutorial.md's `wait_for` shell function, run as written (bash, curl, jq) against a live server: a create that
fails stops the wait at once with the instance's error code and reason, and a refused create prints the refusal,
instead of polling for five minutes (150 polls, 2 s apart)."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from apps.compute.drivers.fake import FakeDriver
from apps.compute.models import Instance
from tests.tenancy.helpers import token_for

from .conftest import create_body, drive, gpu_host

TUTORIAL = Path(__file__).parents[2] / "docs" / "tutorial.md"


def _wait_for(api: str, token: str, *args: str) -> subprocess.CompletedProcess:
    (function,) = re.findall(r"^wait_for\(\) \{.*?return 1; \}$", TUTORIAL.read_text(), re.S | re.M)
    return subprocess.run(["bash", "-c", f'{function}\nwait_for "$@"', "wait_for", *args], capture_output=True,
                          text=True, timeout=30, env={"API": api, "TOKEN": token, "PATH": "/usr/bin:/bin"})


@pytest.mark.django_db(transaction=True)
def test_wait_for_stops_on_a_failed_create_with_its_reason(world, live_server):
    host = gpu_host(gpus=0)
    FakeDriver.fail_define[host.libvirt_uri] = "domain_config_unsupported"
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.cpu), format="json")
    assert drive(resp.data["operation"]["id"]).status == "failed"
    inst = resp.data["instance"]["id"]
    token = token_for(world.member_a, organization=world.org_a)

    done = _wait_for(f"{live_server.url}/api/v1", token, f"instances/{inst}", "active")
    reason = Instance.objects.get(pk=inst).error_reason
    assert reason.endswith(": injected failure")
    shown = json.dumps({"status": "error", "error_code": "domain_config_unsupported", "error_reason": reason},
                       separators=(",", ":"))
    assert (done.returncode, done.stdout) == (1, f"instances/{inst} is error:\n{shown}\n")


def test_wait_for_prints_a_refused_create():
    """The create's answer was a problem (`VM=refused: {...}`): nothing is polled."""
    done = _wait_for("http://127.0.0.1:9/api/v1", "unused", 'instances/refused: {"code":"quota_exceeded"}', "active")
    assert (done.returncode, done.stdout) == (1, 'refused: {"code":"quota_exceeded"}\n')
