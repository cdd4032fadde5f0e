"""After a tenant's bare-metal delete, before the host goes to anyone else: the erase is read back from the disk
(sample blocks of a real QEMU disk image, written with a known pattern, read with qemu-io) and the GPUs are reset
and validated by the node agent (the real agent executor on its fake NVML backend, through the real command
queue). The receipt lists each step with how it ran; an erase that left data or a GPU check that did not pass
fails its step and holds the node (fake bare-metal driver, real runner)."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from gpucloud_agent.backends.fake import FakeBackend
from gpucloud_agent.executor import Executor

from apps.baremetal.models import BaremetalNode, ExitReceipt
from apps.baremetal.services.erase import sample_offsets
from apps.inventory.models import AgentCredential, Host
from apps.inventory.services.agent import agent_command_report, agent_commands_pull
from apps.operations.models import Operation

from .conftest import bm_body, bm_host, drive, enroll

pytestmark = pytest.mark.django_db
MIB = 1024 * 1024


def _redfish_node(world) -> BaremetalNode:
    host = bm_host()
    node_id, op = enroll(world.staff_client, host, driver="redfish", bmc_address="https://10.0.0.17",
                         bmc_system_id="/redfish/v1/Systems/1", bmc_username="admin", bmc_password="pw")
    assert op.status == "succeeded", (op.error_code, op.error_detail)
    return BaremetalNode.objects.select_related("host").get(pk=node_id)


def _deploy_and_delete(world, flavor):
    resp = world.client_a.post("/api/v1/instances/", bm_body(world, flavor), format="json")
    assert resp.status_code == 202, resp.content
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    inst_id = resp.data["instance"]["id"]
    delete = world.client_a.delete(f"/api/v1/instances/{inst_id}/")
    assert delete.status_code == 202
    return inst_id, drive(delete.data["operation"]["id"])


def _steps(inst_id) -> dict[str, dict]:
    return {s["step"]: s for s in json.loads(ExitReceipt.objects.get(instance_id=inst_id).payload)["steps"]}


def _qemu(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, timeout=30)


@pytest.fixture
def disk(tmp_path, settings):
    """A 4 MiB raw disk image full of 0xa5 (the tenant's data)."""
    if not (shutil.which("qemu-img") and shutil.which("qemu-io")):
        pytest.skip("qemu-img and qemu-io are not installed (Debian package qemu-utils)")
    path = tmp_path / "disk.raw"
    _qemu("qemu-img", "create", "-f", "raw", str(path), "4M")
    _qemu("qemu-io", "-f", "raw", "-c", "write -P 0xa5 0 4M", str(path))
    return path


@pytest.mark.parametrize("erase", ["whole_disk", "metadata_only"])
def test_the_erase_is_read_back_and_one_that_left_data_fails_its_step(world, bm_driver, bm_flavor, disk, settings,
                                                                      erase):
    node = _redfish_node(world)
    settings.BAREMETAL_DISK_IMAGES = {node.host.name: str(disk)}
    if erase == "whole_disk":  # what Ironic's erase_devices leaves: zeros everywhere
        _qemu("qemu-io", "-f", "raw", "-c", "write -z 0 4M", str(disk))
    else:  # what erase_devices_metadata leaves: the first and last 64 KiB wiped, the data in between intact
        _qemu("qemu-io", "-f", "raw", "-c", "write -z 0 64k", "-c", f"write -z {4 * MIB - 65536} 64k", str(disk))
    inst_id, op = _deploy_and_delete(world, bm_flavor)
    assert op.status == "succeeded", (op.error_code, op.error_detail)  # the tenant's delete completes either way
    step = _steps(inst_id)["disk_erase_read_back"]
    assert (step["how"], step["sampled_blocks"], step["block_bytes"]) == ("executed", 16, 4096)
    assert step["started_at"] and step["finished_at"]
    node.refresh_from_db()
    host = Host.objects.get(pk=node.host_id)
    if erase == "whole_disk":
        assert (step["result"], step["blocks_with_data"]) == ("succeeded", [])
        assert "16 sampled blocks of 4096 bytes" in step["detail"] and "read back as zeros" in step["detail"]
        assert (node.held_reason, host.state) == ("", "available")
    else:
        offsets = sample_offsets(4 * MIB)
        assert (step["result"], step["blocks_with_data"]) == ("failed", offsets[1:-1])  # first and last were wiped
        assert step["detail"].startswith("14 of 16 sampled blocks") and "still hold data" in step["detail"]
        assert node.held_reason.startswith("bare-metal: erase read-back failed")
        assert host.state == "maintenance"  # never handed to the next tenant


def test_without_a_way_to_read_the_disk_the_read_back_is_skipped_with_the_reason(world, bm_driver, bm_flavor):
    _redfish_node(world)
    inst_id, op = _deploy_and_delete(world, bm_flavor)
    assert op.status == "succeeded"
    step = _steps(inst_id)["disk_erase_read_back"]
    assert (step["result"], step["started_at"]) == ("not_run", None)
    assert step["how"].startswith("skipped: this deployment has no way to read the node's disks back")
    gpu = _steps(inst_id)["gpu_reset"]
    assert (gpu["result"], gpu["how"]) == ("not_run", "skipped: no node agent is enrolled on this host")


class Agent:
    """The node agent on the bare-metal host: the real executor on the fake NVML backend (8 H100s)."""

    def __init__(self, host):
        self.cred = AgentCredential.objects.create(host=host, prefix=f"b{host.pk.hex[:12]}", secret_hash="x")
        self.backend = FakeBackend()
        self.executor = Executor(self.backend)

    def run(self) -> list[str]:
        ran = []
        for cmd in agent_commands_pull(credential=self.cred):
            out = self.executor.execute({"id": str(cmd.pk), "kind": cmd.kind, "payload": cmd.payload})
            agent_command_report(credential=self.cred, command_id=cmd.pk, succeeded=out["succeeded"],
                                 result=out["result"], error=out["error"])
            ran.append(cmd.kind)
        return ran


@pytest.mark.parametrize("diagnostics", ["pass", "pass_with_errors"])
def test_gpu_reset_and_validation_run_by_the_node_agent_before_the_host_returns(world, bm_driver, bm_flavor,
                                                                                  diagnostics):
    node = _redfish_node(world)
    agent = Agent(node.host)
    if diagnostics == "pass_with_errors":  # DCGM's way of reporting a flaky GPU: overall pass, errors logged
        agent.backend.set_diagnostics("pass", errors=["GPU 3: XID 79, fell off the bus"])
    inst_id, delete = _deploy_and_delete(world, bm_flavor)
    # the tenant's delete is done; the host's cleaning waits for the agent: out of placement, no receipt yet
    assert delete.status == "succeeded"
    op = Operation.objects.get(pk=delete.state["clean_operation"])
    assert (op.status, op.steps_done[-1]) == ("running", "erase_read_back"), (op.status, op.steps_done)
    assert Host.objects.get(pk=node.host_id).state == "maintenance"
    assert not ExitReceipt.objects.filter(instance_id=inst_id).exists()
    assert sorted(agent.run()) == ["reset_gpu"] * 8 + ["run_diagnostics"]
    op = drive(op.pk)
    assert op.status == "succeeded", (op.error_code, op.error_detail)
    steps = _steps(inst_id)
    reset, check = steps["gpu_reset"], steps["gpu_validation"]
    assert (reset["result"], reset["how"]) == ("succeeded", "executed")
    assert reset["detail"].startswith("GPU 0: succeeded, health ok; GPU 1: succeeded, health ok")
    assert check["how"] == "executed" and check["finished_at"]
    host = Host.objects.get(pk=node.host_id)
    node.refresh_from_db()
    if diagnostics == "pass":
        assert (check["result"], check["detail"]) == ("succeeded", "dcgm 3.3.9: pass")
        assert (node.held_reason, host.state) == ("", "available")
        assert set(host.gpus.values_list("scrub_state", flat=True)) == {"clean"}
    else:
        assert check["result"] == "failed" and "XID 79" in check["detail"]
        assert node.held_reason == "bare-metal: gpu_validation after the tenant did not pass"
        assert host.state == "maintenance"
