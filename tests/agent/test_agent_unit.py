"""Agent pieces without a control plane: sysfs parsing, the fake driver's MIG rules, the executor journal, CLI."""
import json

import pytest
from gpucloud_agent import cli, sysfs
from gpucloud_agent.backends import BackendError, get_backend
from gpucloud_agent.backends.fake import FakeBackend
from gpucloud_agent.executor import Executor, Journal


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_sysfs_hca_ports_and_host_facts(tmp_path):
    port = tmp_path / "class/infiniband/mlx5_0/ports/1"
    write(port / "gids/0", "fe80:0000:0000:0000:946d:ae03:00a1:0002\n")
    write(port / "lid", "0x1f\n")
    write(port / "rate", "400 Gb/sec (4X NDR)\n")
    write(port / "state", "4: ACTIVE\n")
    write(port / "link_layer", "InfiniBand\n")
    eth = tmp_path / "class/infiniband/mlx5_1/ports/1"
    write(eth / "link_layer", "Ethernet\n")
    assert sysfs.hca_ports(tmp_path) == [{"device": "mlx5_0", "port_number": 1, "port_guid": "0x946dae0300a10002",
                                          "lid": 31, "rate_gbps": 400, "state": "ACTIVE", "pci_address": "",
                                          "vfs": []}]
    for cpu, (pkg, core) in enumerate([(0, 0), (0, 0), (0, 1), (1, 0)]):
        write(tmp_path / f"devices/system/cpu/cpu{cpu}/topology/physical_package_id", str(pkg))
        write(tmp_path / f"devices/system/cpu/cpu{cpu}/topology/core_id", str(core))
    (tmp_path / "devices/system/node/node0").mkdir(parents=True)
    (tmp_path / "devices/system/node/node1").mkdir(parents=True)
    write(tmp_path / "proc/meminfo", "MemTotal:       2113536 kB\n")
    assert sysfs.host_facts(tmp_path, tmp_path / "proc") == {"cpu_sockets": 2, "cpu_cores": 3, "cpu_threads": 4,
                                                             "memory_mib": 2064, "numa_nodes": 2}


def test_host_facts_list_each_numa_nodes_cpus_cores_and_memory(tmp_path):
    """2 sockets x 2 cores x SMT 2, Linux's numbering (siblings +4): node 0 has CPUs 0,1,4,5."""
    for cpu in range(8):
        write(tmp_path / f"devices/system/cpu/cpu{cpu}/topology/physical_package_id", str((cpu % 4) // 2))
        write(tmp_path / f"devices/system/cpu/cpu{cpu}/topology/core_id", str(cpu % 2))
    write(tmp_path / "devices/system/node/node0/cpulist", "0-1,4-5\n")
    write(tmp_path / "devices/system/node/node0/meminfo", "Node 0 MemTotal:       1048576 kB\n")
    write(tmp_path / "devices/system/node/node1/cpulist", "2-3,6-7\n")
    write(tmp_path / "devices/system/node/node1/meminfo", "Node 1 MemTotal:       2097152 kB\n")
    write(tmp_path / "proc/meminfo", "MemTotal:       3145728 kB\n")
    facts = sysfs.host_facts(tmp_path, tmp_path / "proc")
    assert (facts["cpu_sockets"], facts["cpu_cores"], facts["cpu_threads"], facts["numa_nodes"]) == (2, 4, 8, 2)
    assert facts["numa"] == [
        {"node": 0, "cpus": [0, 1, 4, 5], "cores": [[0, 4], [1, 5]], "memory_mib": 1024},
        {"node": 1, "cpus": [2, 3, 6, 7], "cores": [[2, 6], [3, 7]], "memory_mib": 2048}]


def test_fake_driver_refuses_what_the_driver_refuses():
    fake = get_backend("fake", host="hgx-h200")
    with pytest.raises(BackendError) as exc:
        fake.create_gpu_instance(0, 9, 0)
    assert exc.value.code == "NVML_ERROR_NOT_SUPPORTED"  # MIG mode off
    fake.set_mig_mode(0, True)
    fake.create_gpu_instance(0, 9, 0)
    with pytest.raises(BackendError) as exc:
        fake.create_gpu_instance(0, 5, 0)  # 4g over the 3g's slices
    assert exc.value.code == "NVML_ERROR_INSUFFICIENT_RESOURCES"
    with pytest.raises(BackendError):
        fake.create_gpu_instance(0, 9, 2)  # not an allowed start
    assert [g.memory_mib for g in fake.gpus()][:1] == [143771]


def test_executor_journal_survives_restart(tmp_path):
    fake = get_backend("fake")
    cmd = {"id": "c1", "kind": "apply_mig_layout",
           "payload": {"gpu_index": 0, "layout": [{"profile_id": 0, "start": 0, "size": 8}]}}
    first = Executor(fake, Journal(tmp_path / "j.json")).execute(cmd)
    fake.destroy_gpu_instance(0, 0)  # somebody changes the device behind the agent's back
    again = Executor(fake, Journal(tmp_path / "j.json"))
    assert again.execute(cmd) == first and again.executions == 0
    assert fake.gpu_instances(0) == []  # not re-executed


def test_executor_reports_device_errors_as_failed_results():
    ex = Executor(get_backend("fake"))
    out = ex.execute({"id": "c2", "kind": "destroy_gpu_instance", "payload": {"gpu_index": 9, "start": 0}})
    assert out["succeeded"] is False and out["result"]["code"] == "NVML_ERROR_INVALID_ARGUMENT"


def test_cli_discover_fake(capsys, tmp_path):
    assert cli.main(["--backend", "fake", "--fake-host", "hgx-h200", "discover"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [g["model"] for g in doc["gpus"]] == ["H200-SXM-141GB"] * 8
    assert len(doc["hca_ports"]) == 8 and doc["nvswitch"] == {"active_partitions": []}


def test_sysfs_virtual_functions(tmp_path):
    gpu = tmp_path / "bus/pci/devices/0000:1b:00.0"
    gpu.mkdir(parents=True)
    for n, addr in enumerate(["0000:1b:00.4", "0000:1b:00.5"]):
        (gpu / f"virtfn{n}").symlink_to(f"../{addr}")
    assert sysfs.pci_virtual_functions(tmp_path, "0000:1b:00.0") == [
        {"index": 0, "pci_address": "0000:1b:00.4"}, {"index": 1, "pci_address": "0000:1b:00.5"}]
    assert sysfs.pci_virtual_functions(tmp_path, "0000:43:00.0") == []


def test_sysfs_vf_reset_clears_the_vgpu_then_resets_the_function(tmp_path):
    vf = tmp_path / "bus/pci/devices/0000:1b:00.4"
    (vf / "nvidia").mkdir(parents=True)
    (vf / "nvidia/current_vgpu_type").write_text("1061\n")
    sysfs.pci_vf_reset(tmp_path, "0000:1b:00.4")
    assert ((vf / "nvidia/current_vgpu_type").read_text(), (vf / "reset").read_text()) == ("0", "1")
    with pytest.raises(FileNotFoundError):
        sysfs.pci_vf_reset(tmp_path, "0000:1b:00.5")


def test_executor_reset_vf_reports_the_gpus_health_check():
    from gpucloud_agent.backends.fake import FakeBackend

    fake = FakeBackend(vfs_per_gpu=2)
    address = fake.gpus()[1].vfs[1]["pci_address"]
    ex = Executor(fake)
    out = ex.execute({"id": "v1", "kind": "reset_vf", "payload": {"gpu_index": 1, "vf_address": address}})
    assert (out["succeeded"], out["result"]["health"], fake.state["vf_resets"]) == (True, "ok", {address: 1})
    gone = ex.execute({"id": "v2", "kind": "reset_vf", "payload": {"gpu_index": 1, "vf_address": "0000:00:00.7"}})
    assert (gone["succeeded"], gone["result"]["code"]) == (False, "vf_not_found")


class _FailingCreate(FakeBackend):
    """The fake with one device fault: creating a GPU instance of `profile_id` fails as NVML does when it runs out."""

    def __init__(self, profile_id: int):
        super().__init__()
        self.failing = profile_id

    def create_gpu_instance(self, index, profile_id, start):
        if profile_id == self.failing:
            raise BackendError("Insufficient Resources", "NVML_ERROR_INSUFFICIENT_RESOURCES")
        return super().create_gpu_instance(index, profile_id, start)


class _Misplacing(FakeBackend):
    """The fake with a driver that puts a 1g.10gb GPU instance asked at slice 0 on slice 6 (no error)."""

    def create_gpu_instance(self, index, profile_id, start):
        return super().create_gpu_instance(index, profile_id, 6 if (profile_id, start) == (19, 0) else start)


def _apply(ex, cid, index, layout):
    return ex.execute({"id": cid, "kind": "apply_mig_layout", "payload": {"gpu_index": index, "layout": layout}})


def test_a_failed_apply_puts_the_previous_layout_back():
    backend = _FailingCreate(profile_id=0)
    ex = Executor(backend)
    two = [{"profile_id": 9, "start": 0, "size": 4}, {"profile_id": 9, "start": 4, "size": 4}]
    assert _apply(ex, "c1", 0, two)["succeeded"]
    out = _apply(ex, "c2", 0, [{"profile_id": 0, "start": 0, "size": 8}])  # destroys both, then 7g fails
    assert out["succeeded"] is False and out["result"]["code"] == "NVML_ERROR_INSUFFICIENT_RESOURCES"
    assert out["result"]["rolled_back"] is True
    assert [(g["profile_id"], g["start"]) for g in out["result"]["layout"]] == [(9, 0), (9, 4)]
    assert [(g.profile_id, g.start) for g in backend.gpu_instances(0)] == [(9, 0), (9, 4)]


def test_an_apply_that_reads_back_another_layout_fails_and_rolls_back_the_mig_mode_too():
    backend = _Misplacing()
    out = _apply(Executor(backend), "c1", 0, [{"profile_id": 19, "start": 0, "size": 1}])
    assert out["succeeded"] is False and out["result"]["code"] == "mig_layout_mismatch", out
    assert "reads back GPU instances [(19, 6)]" in out["error"]
    assert out["result"]["rolled_back"] is True and out["result"]["layout"] == []
    assert backend.gpu_instances(0) == [] and backend.state["mig"]["0"] is False


class _PendingDisable(_FailingCreate):
    """The fake whose driver only marks a MIG mode disable pending (NVML's activation status): the GPU stays in
    MIG mode until it is reset, as a GPU the driver cannot switch at once does."""

    def set_mig_mode(self, index, enabled):
        if enabled:
            return super().set_mig_mode(index, True)
        self.state.setdefault("pending_off", []).append(index)

    def reset_gpu(self, index):
        super().reset_gpu(index)
        if index in self.state.get("pending_off", []):
            self.state["pending_off"].remove(index)
            super().set_mig_mode(index, False)


def test_a_failed_restore_on_a_gpu_not_in_mig_mode_leaves_it_out_of_mig_mode():
    """After a reboot the GPU reports MIG mode off; the restore of its recorded layout turns it on, fails, and the
    rollback must turn it off again even where the driver only marks that pending (a reset applies it)."""
    backend = _PendingDisable(profile_id=9)
    out = _apply(Executor(backend), "c1", 0, [{"profile_id": 9, "start": 0, "size": 4}])
    assert out["succeeded"] is False and out["result"]["code"] == "NVML_ERROR_INSUFFICIENT_RESOURCES"
    assert backend.state["mig"]["0"] is False  # the mode it had before
    assert out["result"]["rolled_back"] is True and out["result"]["mig_enabled"] is False
    assert backend.state["resets"]["0"] == 1


def test_sysfs_sets_a_vfs_vgpu_type_by_name_and_reads_it_back(tmp_path):
    """NVIDIA's vendor VFIO interface (vGPU user guide, Ada/Hopper SR-IOV): `creatable_vgpu_types` lists
    `id : NVIDIA <name>`; the id goes to `current_vgpu_type`."""
    vf = tmp_path / "bus/pci/devices/0000:1b:00.4"
    (vf / "nvidia").mkdir(parents=True)
    (vf / "nvidia/current_vgpu_type").write_text("0\n")
    (vf / "nvidia/creatable_vgpu_types").write_text(
        "ID    : vGPU Name\n1150  : NVIDIA L40S-1Q\n1153  : NVIDIA L40S-4Q\n1154  : NVIDIA L40S-6Q\n")
    (vf / "nvidia/supported_vgpu_types").write_text("ID    : vGPU Name\n1153  : NVIDIA L40S-4Q\n1155  : NVIDIA L40S-8Q\n")
    with pytest.raises(LookupError):
        sysfs.pci_vf_set_vgpu_type(tmp_path, "0000:1b:00.4", "L40S-48Q")
    assert sysfs.pci_vf_set_vgpu_type(tmp_path, "0000:1b:00.4", "L40S-4Q") == "1153"
    assert (vf / "nvidia/current_vgpu_type").read_text() == "1153"
    assert sysfs.pci_vf_set_vgpu_type(tmp_path, "0000:1b:00.4", "L40S-4Q") == "1153"  # already so: unchanged
    with pytest.raises(ValueError, match="reset the VF"):
        sysfs.pci_vf_set_vgpu_type(tmp_path, "0000:1b:00.4", "L40S-8Q")  # another type: a reset comes first
    sysfs.pci_vf_reset(tmp_path, "0000:1b:00.4")
    assert (vf / "nvidia/current_vgpu_type").read_text() == "0"
    with pytest.raises(FileNotFoundError):
        sysfs.pci_vf_set_vgpu_type(tmp_path, "0000:1b:00.5", "L40S-4Q")


def test_executor_sets_and_the_reset_clears_a_vfs_vgpu_type():
    fake = FakeBackend(vfs_per_gpu=2)
    address = fake.gpus()[0].vfs[0]["pci_address"]
    ex = Executor(fake)
    out = ex.execute({"id": "t1", "kind": "set_vf_vgpu_type",
                      "payload": {"gpu_index": 0, "vf_address": address, "vgpu_type": "H100XM-8C"}})
    assert out == {"succeeded": True, "result": {"vf_address": address, "vgpu_type": "H100XM-8C"}, "error": ""}
    other = ex.execute({"id": "t2", "kind": "set_vf_vgpu_type",
                        "payload": {"gpu_index": 0, "vf_address": address, "vgpu_type": "H100XM-4C"}})
    assert (other["succeeded"], other["result"]["code"]) == (False, "vf_vgpu_type_failed")
    ex.execute({"id": "t3", "kind": "reset_vf", "payload": {"gpu_index": 0, "vf_address": address}})
    assert fake.state["vf_types"] == {}

def test_dcgm_report_a_pass_with_logged_errors_keeps_the_errors_and_a_fail_is_a_fail():
    from gpucloud_agent.diagnostics import dcgm_report_parse, run_check

    report = {"version": "3.3.9", "DCGM GPU Diagnostic": {"test_categories": [
        {"category": "Deployment", "tests": [{"name": "Blacklist", "results": [{"gpu_ids": "0", "status": "Pass"}]}]},
        {"category": "Hardware", "tests": [{"name": "Memory", "results": [
            {"gpu_ids": "0", "status": "Pass", "warnings": [{"warning": "GPU 0: 2 uncorrectable ECC errors"}]},
            {"gpu_ids": "1", "status": "Pass", "error": "GPU 1: row remap pending"}]}]}]}}
    parsed = dcgm_report_parse(json.dumps(report))
    assert (parsed["result"], parsed["errors"], parsed["warnings"], parsed["tool_version"]) == (
        "pass", ["GPU 1: row remap pending"], ["GPU 0: 2 uncorrectable ECC errors"], "3.3.9")
    report["DCGM GPU Diagnostic"]["test_categories"][1]["tests"][0]["results"][0]["status"] = "Fail"
    assert dcgm_report_parse(json.dumps(report))["result"] == "fail"
    assert dcgm_report_parse("dcgmi: error connecting to host engine")["result"] == "error"
    # no DCGM and no validation command: never a pass
    assert run_check([0], 2, "", dcgmi="no-such-dcgmi")["result"] == "error"


def test_validation_command_exit_code_and_error_lines_decide(tmp_path):
    from gpucloud_agent.diagnostics import run_check

    ok = run_check([0, 3], 2, 'echo "GPUCLOUD_TOOL_VERSION=burn-1.2"; echo "gpus=$GPUCLOUD_GPU_INDEXES"',
                   dcgmi="no-such-dcgmi")
    assert (ok["tool"], ok["tool_version"], ok["result"], ok["errors"]) == ("command", "burn-1.2", "pass", [])
    assert "gpus=0,3" in ok["output_tail"]
    flaky = run_check([0], 2, 'echo "ERROR: NCCL all-reduce 12% below baseline"; exit 0', dcgmi="no-such-dcgmi")
    assert (flaky["result"], flaky["errors"]) == ("pass", ["ERROR: NCCL all-reduce 12% below baseline"])
    assert run_check([0], 2, "exit 3", dcgmi="no-such-dcgmi")["result"] == "fail"


def test_reboot_command_succeeds_after_the_host_came_back(tmp_path):
    """The reboot kills the agent before it can report; after the restart the control plane sends the command
    again and the changed boot id says the reboot happened."""
    backend = get_backend("fake", host="hgx-h100", host_id=3, state_path=str(tmp_path / "driver.json"))

    class Died(BaseException):
        pass

    def reboot_and_die():
        backend.state["boots"] = backend.state.get("boots", 0) + 1
        backend._save()
        raise Died()

    backend.reboot_host = reboot_and_die
    journal = tmp_path / "journal.json"
    command = {"id": "c-reboot", "kind": "reboot_host", "payload": {}}
    with pytest.raises(Died):
        Executor(backend, Journal(journal)).execute(command)
    after = get_backend("fake", host="hgx-h100", host_id=3, state_path=str(tmp_path / "driver.json"))
    out = Executor(after, Journal(journal)).execute(command)
    assert out["succeeded"] and out["result"] == {"previous_boot_id": "fake-boot-3-0", "boot_id": "fake-boot-3-1"}

    class Stuck:  # the reboot did not happen: the same boot id after the backend returned
        def boot_id(self):
            return "same"

        def reboot_host(self):
            return None

    out = Executor(Stuck(), Journal()).execute({"id": "c2", "kind": "reboot_host", "payload": {}})
    assert (out["succeeded"], out["result"]) == (False, {"code": "reboot_not_observed"})


def test_fake_diagnostics_set_from_the_cli(tmp_path):
    state = tmp_path / "agent"
    assert cli.main(["--backend", "fake", "--fake-host-id", "4", "diag-set", "--state", str(state), "--result",
                     "pass", "--error", "EUD: 1 error", "--times", "1"]) == 0
    backend = get_backend("fake", host="hgx-h100", host_id=4, state_path=str(state / "fake-driver.json"))
    first, second = backend.diagnostics([0], 2), backend.diagnostics([0], 2)
    assert (first["result"], first["errors"], second["errors"]) == ("pass", ["EUD: 1 error"], [])


def test_sysfs_enables_vfs_and_binds_vfio_and_reads_both_back(tmp_path):
    """The kernel PCI sysfs ABI after a reboot: `sriov_numvfs` is 0 and the VFs' `virtfnN` links are gone; a
    passthrough function is on its default driver. The tree here has no kernel behind it, so what the kernel would
    make is laid out beforehand where the test wants the read-back to pass."""
    pf = tmp_path / "bus/pci/devices/0000:1b:00.0"
    write(pf / "sriov_numvfs", "0")
    with pytest.raises(ValueError, match="0 VFs after enabling 2"):  # the kernel created none
        sysfs.pci_sriov_enable(tmp_path, "0000:1b:00.0", 2)
    assert (pf / "sriov_numvfs").read_text() == "2"
    for v in range(2):
        (tmp_path / f"bus/pci/devices/0000:1b:00.{v + 4}").mkdir(parents=True)
        (pf / f"virtfn{v}").symlink_to(tmp_path / f"bus/pci/devices/0000:1b:00.{v + 4}")
    assert sysfs.pci_sriov_enable(tmp_path, "0000:1b:00.0", 2) == 2
    with pytest.raises(FileNotFoundError):
        sysfs.pci_sriov_enable(tmp_path, "0000:43:00.0", 2)  # did not come back
    gpu = tmp_path / "bus/pci/devices/0000:52:00.0"
    gpu.mkdir(parents=True)
    write(tmp_path / "bus/pci/drivers/nvidia/unbind", "")
    write(tmp_path / "bus/pci/drivers_probe", "")
    (gpu / "driver").symlink_to(tmp_path / "bus/pci/drivers/nvidia")
    with pytest.raises(ValueError, match="bound to nvidia, not vfio-pci"):
        sysfs.pci_bind_vfio(tmp_path, "0000:52:00.0")
    assert (gpu / "driver_override").read_text() == "vfio-pci"
    assert (tmp_path / "bus/pci/drivers/nvidia/unbind").read_text() == "0000:52:00.0"
    assert (tmp_path / "bus/pci/drivers_probe").read_text() == "0000:52:00.0"
    (gpu / "driver").unlink()
    (tmp_path / "bus/pci/drivers/vfio-pci").mkdir()
    (gpu / "driver").symlink_to(tmp_path / "bus/pci/drivers/vfio-pci")
    sysfs.pci_bind_vfio(tmp_path, "0000:52:00.0")  # already there: nothing written
    with pytest.raises(FileNotFoundError):
        sysfs.pci_bind_vfio(tmp_path, "0000:61:00.0")


def test_after_a_reboot_the_executor_restores_vfs_and_vfio_and_names_what_did_not_come_back():
    fake = FakeBackend(vfs_per_gpu=2)
    assert len(fake.gpus()[0].vfs) == 2
    fake.reboot_host()
    assert fake.gpus()[0].vfs == [] and fake.gpus()[1].vfs == []  # the kernel forgot them
    fake.state["lost"] = ["0000:43:00.0"]  # GPU 1 fell off the bus during the reboot
    ex = Executor(fake)
    out = ex.execute({"id": "r1", "kind": "restore_devices", "payload": {
        "sriov": [{"pci_address": "0000:1b:00.0", "num_vfs": 2}, {"pci_address": "0000:43:00.0", "num_vfs": 2}],
        "vfio": [{"pci_address": "0000:52:00.0"}]}})
    assert out["succeeded"] is False and out["result"]["code"] == "devices_missing"
    assert out["result"]["restored"] == ["0000:1b:00.0", "0000:52:00.0"]
    assert [(m["pci_address"], m["step"], m["code"]) for m in out["result"]["missing"]] == [
        ("0000:43:00.0", "sriov", "device_missing")]
    assert len(fake.gpus()[0].vfs) == 2 and fake.gpus()[1].vfs == [] and fake.state["vfio"] == ["0000:52:00.0"]
    again = ex.execute({"id": "r2", "kind": "restore_devices", "payload": {
        "sriov": [{"pci_address": "0000:1b:00.0", "num_vfs": 2}], "vfio": []}})
    assert again == {"succeeded": True, "result": {"restored": ["0000:1b:00.0"], "missing": []}, "error": ""}


def test_the_agent_sends_its_inventory_with_the_boot_id_once_per_boot(tmp_path):
    from gpucloud_agent.agent import Agent

    class Cp:
        def __init__(self):
            self.beats = []

        def heartbeat(self, version, inventory):
            self.beats.append(inventory)
            return {"pending_commands": 0}

    fake, cp = FakeBackend(host_id=3), Cp()
    agent = Agent(fake, cp, state_dir=str(tmp_path))
    agent.run_once()
    agent.run_once()
    assert cp.beats[0]["host"]["boot_id"] == "fake-boot-3-0" and cp.beats[1] is None
    Agent(fake, cp, state_dir=str(tmp_path)).run_once()  # the agent restarted, the host did not
    assert cp.beats[2] is None
    fake.reboot_host()
    agent = Agent(fake, cp, state_dir=str(tmp_path))
    agent.run_once()
    assert cp.beats[3]["host"]["boot_id"] == "fake-boot-3-1"


def test_sysfs_hca_ports_name_their_pci_function_and_its_sriov_vfs_and_skip_the_vfs_own_devices(tmp_path):
    """An HCA physical function with two VFs: the port carries the PF's PCI address and the VFs (index, address,
    from its `virtfnN` links); the VF's own RDMA device (mlx5_8, with a `physfn` link) is no port of the host."""
    pf = tmp_path / "bus/pci/devices/0000:1a:00.0"
    pf.mkdir(parents=True)
    for n, addr in enumerate(["0000:1a:00.1", "0000:1a:00.2"]):
        (tmp_path / "bus/pci/devices" / addr).mkdir()
        (pf / f"virtfn{n}").symlink_to(f"../{addr}")
    for dev, pci in (("mlx5_0", "0000:1a:00.0"), ("mlx5_8", "0000:1a:00.1")):
        port = tmp_path / f"class/infiniband/{dev}/ports/1"
        write(port / "gids/0", "fe80:0000:0000:0000:946d:ae03:00a1:0002\n")
        write(port / "link_layer", "InfiniBand\n")
        (tmp_path / f"class/infiniband/{dev}/device").symlink_to(tmp_path / "bus/pci/devices" / pci)
    (tmp_path / "bus/pci/devices/0000:1a:00.1/physfn").symlink_to("../0000:1a:00.0")
    (port,) = sysfs.hca_ports(tmp_path)
    assert (port["device"], port["pci_address"], port["vfs"]) == ("mlx5_0", "0000:1a:00.0", [
        {"index": 0, "pci_address": "0000:1a:00.1"}, {"index": 1, "pci_address": "0000:1a:00.2"}])


def test_sysfs_sets_an_hca_vfs_node_and_port_guid_and_clears_it(tmp_path):
    vf = tmp_path / "class/infiniband/mlx5_0/device/sriov/3"
    vf.mkdir(parents=True)
    sysfs.hca_vf_set_guid(tmp_path, "mlx5_0", 3, "0x0200000000000101")
    assert [(vf / n).read_text() for n in ("node", "port", "policy")] == [
        "02:00:00:00:00:00:01:01", "02:00:00:00:00:00:01:01", "Follow"]
    sysfs.hca_vf_set_guid(tmp_path, "mlx5_0", 3, "0x0")
    assert [(vf / n).read_text() for n in ("node", "port", "policy")] == ["00:00:00:00:00:00:00:00"] * 2 + ["Down"]
    with pytest.raises(FileNotFoundError):
        sysfs.hca_vf_set_guid(tmp_path, "mlx5_0", 4, "0x0200000000000101")


def test_executor_sets_an_hca_vfs_guid_on_the_fake_and_the_fake_reports_its_vfs():
    fake = FakeBackend(vfs_per_hca=2)
    (first, *_) = fake.hca_ports()
    assert (first["pci_address"], first["vfs"]) == ("0000:1a:00.0", [
        {"index": 0, "pci_address": "0000:1a:00.1"}, {"index": 1, "pci_address": "0000:1a:00.2"}])
    ex = Executor(fake)
    out = ex.execute({"id": "g1", "kind": "set_hca_vf_guid",
                      "payload": {"device": "mlx5_0", "vf_index": 1, "guid": "0x0200000000000101"}})
    assert (out["succeeded"], fake.state["hca_vf_guids"]) == (True, {"mlx5_0/1": "0x0200000000000101"})
    ex.execute({"id": "g2", "kind": "set_hca_vf_guid", "payload": {"device": "mlx5_0", "vf_index": 1, "guid": "0x0"}})
    assert fake.state["hca_vf_guids"] == {}
    bad = ex.execute({"id": "g3", "kind": "set_hca_vf_guid",
                      "payload": {"device": "mlx5_0", "vf_index": 2, "guid": "0x0200000000000102"}})
    assert (bad["succeeded"], bad["result"]["code"]) == (False, "hca_vf_not_found")
