"""The node agent (fake NVML backend) against the live Django test server: enroll, inventory, commands."""
import pytest
from gpucloud_agent.agent import Agent
from gpucloud_agent.backends.fake import HCA_DEVICES, FakeBackend
from gpucloud_agent.client import ControlPlane, ControlPlaneError

from apps.core.errors import Conflict, ValidationFailed
from apps.health.services.repair import repairs_advance
from apps.identity.models import StaffRole, User
from apps.inventory.errors import MigLayoutRejected
from apps.inventory.models import AgentCommand, Fabric, Gpu, HcaPort, Host, Region, Switch, Zone
from apps.inventory.services.agent import agent_command_enqueue, enrollment_token_create

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def staff():
    return User.objects.create_user("ops@provider.test", staff_role=StaffRole.OPERATOR)


@pytest.fixture
def host():
    region = Region.objects.create(name="r1")
    zone = Zone.objects.create(name="z1", region=region)
    fabric = Fabric.objects.create(name="ib", kind="infiniband", region=region)
    host = Host.objects.create(name="hgx-01", zone=zone, serial="SER-1", numa_nodes=2,
                               nvswitch_system="hgx-h100-8gpu")
    for rail, dev in enumerate(HCA_DEVICES):
        leaf = Switch.objects.create(name=f"leaf-{rail}", fabric=fabric, role="leaf", rail=rail)
        HcaPort.objects.create(host=host, device=dev, port_guid=f"0xplaceholder{rail}", fabric=fabric, rail=rail,
                               leaf_switch=leaf, leaf_port=1)
    return host


@pytest.fixture
def enrolled(live_server, host, staff):
    backend = FakeBackend("hgx-h100", host_id=7)
    _, token = enrollment_token_create(actor=staff, host=host)
    agent = Agent(backend, ControlPlane(live_server.url))
    agent.enroll(token)
    host.refresh_from_db()
    assert host.state == "enrolling"  # out of placement until the acceptance check passed
    repairs_advance()  # opens the acceptance and queues the check
    assert [r["kind"] for r in agent.run_once()] == ["run_diagnostics"]
    repairs_advance()
    host.refresh_from_db()
    assert host.state == "available"
    agent.executor.executions = 0  # the tests count their own commands
    yield agent, backend
    agent.cp.http.close()  # drop keep-alive connections so the server thread releases its DB session


def db_layout(host, index):
    return [(g.profile_id, g.start, g.size) for g in Gpu.objects.get(host=host, index=index).gpu_instances
            .order_by("start")]


def fake_layout(backend, index):
    return [(g.profile_id, g.start, g.size) for g in backend.gpu_instances(index)]


def test_enroll_makes_inventory_match_the_backend(enrolled, host):
    _, backend = enrolled
    host.refresh_from_db()
    assert host.state == "available" and host.agent_version
    assert (host.cpu_cores, host.cpu_threads, host.memory_mib, host.driver_version) == (112, 224, 2097152,
                                                                                        "550.90.07")
    want = sorted((g.index, g.uuid, g.serial, g.model, g.pci_address, g.numa_node) for g in backend.gpus())
    have = sorted(Gpu.objects.filter(host=host).values_list("index", "uuid", "serial", "model", "pci_address",
                                                            "numa_node"))
    assert have == want and len(have) == 8
    assert Gpu.objects.get(host=host, index=0).observed["pcie"] == {"generation": 5, "width": 16,
                                                                    "max_generation": 5, "max_width": 16}
    assert sorted(HcaPort.objects.filter(host=host).values_list("device", "port_guid")) == sorted(
        (p["device"], p["port_guid"]) for p in backend.hca_ports())


def test_token_is_one_time(live_server, host, staff):
    _, token = enrollment_token_create(actor=staff, host=host)
    cp = ControlPlane(live_server.url)
    Agent(FakeBackend(), cp).enroll(token)
    with pytest.raises(ControlPlaneError) as exc:
        Agent(FakeBackend(), cp).enroll(token)
    cp.http.close()
    assert exc.value.status == 400 and exc.value.body["code"] == "enrollment_token_invalid"


def test_mig_commands_round_trip(enrolled, host, staff):
    agent, backend = enrolled
    cmd = agent_command_enqueue(actor=staff, host=host, kind="apply_mig_layout", payload={
        "gpu_index": 0, "layout": [{"profile": "1g.10gb"}, {"profile": "1g.10gb"}, {"profile": "2g.20gb"},
                                   {"profile": "3g.40gb"}]})
    [report] = agent.run_once()
    assert report["succeeded"], report
    assert fake_layout(backend, 0) == db_layout(host, 0) == [(19, 0, 1), (19, 1, 1), (14, 2, 2), (9, 4, 4)]
    assert Gpu.objects.get(host=host, index=0).mode == "mig"
    cmd.refresh_from_db()
    assert cmd.status == "succeeded"

    agent_command_enqueue(actor=staff, host=host, kind="apply_mig_layout", payload={"gpu_index": 1, "layout": []})
    agent.run_once()
    create = agent_command_enqueue(actor=staff, host=host, kind="create_gpu_instance",
                                   payload={"gpu_index": 1, "profile": "1g.10gb"})
    assert create.payload["start"] == 6  # fragmentation-aware: keeps 4g and 3g placeable
    agent.run_once()
    assert fake_layout(backend, 1) == db_layout(host, 1) == [(19, 6, 1)]
    agent_command_enqueue(actor=staff, host=host, kind="destroy_gpu_instance", payload={"gpu_index": 1, "start": 6})
    agent.run_once()
    assert fake_layout(backend, 1) == db_layout(host, 1) == []


def test_reset_and_partitions_round_trip(enrolled, host, staff):
    agent, backend = enrolled
    agent_command_enqueue(actor=staff, host=host, kind="reset_gpu", payload={"gpu_index": 2})
    agent_command_enqueue(actor=staff, host=host, kind="activate_partition", payload={"partition_id": 1})
    reports = agent.run_once()
    assert [r["succeeded"] for r in reports] == [True, True]
    assert backend.state["resets"]["2"] == 1
    assert Gpu.objects.get(host=host, index=2).health == "ok"
    host.refresh_from_db()
    assert host.active_partitions == [1] == backend.partitions()["active"]
    with pytest.raises(Conflict):  # partition 3 = GPUs 1,2, inside active partition 1
        agent_command_enqueue(actor=staff, host=host, kind="activate_partition", payload={"partition_id": 3})
    agent_command_enqueue(actor=staff, host=host, kind="deactivate_partition", payload={"partition_id": 1})
    agent.run_once()
    host.refresh_from_db()
    assert host.active_partitions == [] == backend.partitions()["active"]


def test_rejected_layout_never_reaches_the_agent(enrolled, host, staff):
    agent, backend = enrolled
    before = AgentCommand.objects.count()
    with pytest.raises(MigLayoutRejected) as exc:
        agent_command_enqueue(actor=staff, host=host, kind="apply_mig_layout",
                              payload={"gpu_index": 0, "layout": [{"profile": "4g.40gb"}, {"profile": "4g.40gb"}]})
    assert exc.value.extra["rejections"][0]["code"] == "max_instances"
    with pytest.raises(ValidationFailed):
        agent_command_enqueue(actor=staff, host=host, kind="create_gpu_instance",
                              payload={"gpu_index": 3, "profile": "1g.10gb"})  # GPU 3 is not in MIG mode
    assert AgentCommand.objects.count() == before
    assert agent.run_once() == [] and agent.executor.executions == 0
    assert fake_layout(backend, 0) == []


def test_repeated_command_runs_once(enrolled, host, staff, monkeypatch):
    agent, backend = enrolled
    cmd = agent_command_enqueue(actor=staff, host=host, kind="apply_mig_layout",
                                payload={"gpu_index": 4, "layout": [{"profile": "7g.80gb"}]})
    real_report = agent.cp.report
    calls = {"n": 0}

    def lost_report(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise ControlPlaneError(503, "lost")
        return real_report(*args, **kwargs)

    monkeypatch.setattr(agent.cp, "report", lost_report)
    with pytest.raises(ControlPlaneError):
        agent.run_once()
    cmd.refresh_from_db()
    assert cmd.status == "dispatched"
    agent.run_once()  # the control plane re-sends the command; the journal answers it
    assert agent.executor.executions == 1
    assert fake_layout(backend, 4) == db_layout(host, 4) == [(0, 0, 8)]
    cmd.refresh_from_db()
    assert cmd.status == "succeeded"
    # a duplicate report changes nothing
    agent.cp.report(str(cmd.id), False, {}, "late duplicate")
    cmd.refresh_from_db()
    assert cmd.status == "succeeded"


def test_reboot_loses_mig_instances_and_the_recorded_geometry_is_restored(enrolled, host, staff):
    """RW-009 (a): after a reboot the host reports no GPU instances; the record stays and is re-created."""
    agent, backend = enrolled
    agent_command_enqueue(actor=staff, host=host, kind="apply_mig_layout",
                          payload={"gpu_index": 3, "layout": [{"profile": "3g.40gb"}, {"profile": "3g.40gb"}]})
    agent.run_once()
    recorded = db_layout(host, 3)
    assert recorded == [(9, 0, 4), (9, 4, 4)]
    backend.state["gis"]["3"] = []  # reboot: MIG mode persists, GPU instances do not
    reports = agent.run_once(send_inventory=True)  # heartbeat carries the inventory; restore is queued and run
    assert [r["kind"] for r in reports] == ["apply_mig_layout"] and reports[0]["succeeded"]
    assert fake_layout(backend, 3) == db_layout(host, 3) == recorded
    assert Gpu.objects.get(host=host, index=3).observed["mig_restore_pending"] is False


def test_sriov_vfs_are_recorded_as_the_kernel_reports_them(live_server, host, staff):
    from apps.inventory.models import VirtualFunction

    backend = FakeBackend("hgx-h200", host_id=9, vfs_per_gpu=4)
    _, token = enrollment_token_create(actor=staff, host=host)
    agent = Agent(backend, ControlPlane(live_server.url))
    agent.enroll(token)
    gpu0 = Gpu.objects.get(host=host, index=0)
    assert list(VirtualFunction.objects.filter(gpu=gpu0).order_by("index").values_list("index", "pci_address")) == [
        (0, "0000:1b:00.4"), (1, "0000:1b:00.5"), (2, "0000:1b:00.6"), (3, "0000:1b:00.7")]
    assert gpu0.observed["vf_count"] == 4
    backend.vfs_per_gpu = 0  # SR-IOV disabled (or the enable step silently failed)
    agent.run_once(send_inventory=True)
    assert VirtualFunction.objects.filter(gpu__host=host).count() == 0
    assert Gpu.objects.get(pk=gpu0.pk).observed["vf_count"] == 0
    agent.cp.http.close()


def test_injected_health_signal_is_reported_once_and_applied(enrolled, host):
    """The fake backend's injection path: an XID 79 on GPU 2 reaches the control plane through the agent API on
    the next cycle, marks that GPU faulty and cordons the host; a cycle after the answer sends nothing again, and
    a signal the control plane refuses (unknown GPU) is dropped, not re-sent forever."""
    from apps.health.models import HealthEvent

    agent, backend = enrolled
    event = backend.inject("xid", xid=79, gpu=2)
    agent.run_once()
    row = HealthEvent.objects.get()
    assert (row.dedup_key, row.xid, row.gpu.index, row.classification) == (event["dedup_key"], 79, 2, "gpu_lost")
    host.refresh_from_db()
    assert host.state == "cordoned" and Gpu.objects.get(host=host, index=2).health == "faulty"
    assert backend.health_events() == []
    agent.run_once()
    assert HealthEvent.objects.count() == 1
    agent.cp.health_event(event)  # a re-send after a lost answer: the stored event, nothing new
    assert HealthEvent.objects.count() == 1
    Gpu.objects.filter(host=host, index=7).delete()  # the inventory no longer knows GPU 7
    backend.inject("ecc_dbe", gpu=7)
    assert agent.report_health() == 0 and backend.health_events() == [] and HealthEvent.objects.count() == 1


def test_an_idle_cycle_is_one_request_and_a_queued_command_is_fetched_in_the_same_cycle(enrolled, host, staff):
    """The heartbeat's answer counts the pending commands; the agent fetches them only when there are some."""
    agent, _ = enrolled
    sent = []
    request = agent.cp.http.request
    agent.cp.http.request = lambda method, url, **kw: sent.append((method, url.rsplit("/agent/", 1)[1])) or \
        request(method, url, **kw)
    agent.run_once()  # the enrollment's inventory left commands to run (or not)
    sent.clear()
    assert agent.run_once() == []
    assert sent == [("POST", "heartbeat")]
    sent.clear()
    agent_command_enqueue(actor=staff, host=host, kind="reset_gpu", payload={"gpu_index": 0})
    [report] = agent.run_once()
    assert report["kind"] == "reset_gpu" and report["succeeded"]
    assert [p for _, p in sent][:2] == ["heartbeat", "commands"]


SXID_FATAL = "nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 24007, Fatal, Link 32 sourcetrack TCEN0 crumbstore ECC DBE Error"
SXID_NONFATAL = "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link {link} egress non-posted PRIV error"


def test_nvswitch_sxids_reach_the_switch_and_a_fatal_one_takes_the_host_out(enrolled, host):
    """Fake backend → agent → control plane: SXid lines as the nvswitch driver prints them are events on the switch
    and port with the SXid number; non-fatal ones are recorded until 10 on one switch within the hour cordon the
    host (others' switches do not count), and a fatal one marks the host faulty and queues its reboot."""
    from apps.health.classification import classification_load
    from apps.health.models import HealthEvent

    agent, backend = enrolled
    for link in range(9):
        backend.inject_kernel_log(SXID_NONFATAL.format(link=link))
    backend.inject_kernel_log(SXID_NONFATAL.format(link=3).replace("nvswitch0", "nvswitch1").replace(":05:", ":06:"))
    agent.run_once()
    rows = HealthEvent.objects.filter(kind="nvswitch_nonfatal")
    assert rows.count() == 10 and set(rows.values_list("classification", flat=True)) == {"observe"}
    first = rows.get(nvswitch="0000:05:00.0", nvswitch_port=0)
    assert (first.xid, first.gpu, first.hca_port) == (12028, None, None)
    assert first.classification_version == classification_load().version  # the table in force
    host.refresh_from_db()
    assert host.state == "available"
    backend.inject_kernel_log(SXID_NONFATAL.format(link=9))  # the 10th on switch 0 within the hour
    agent.run_once()
    tenth = HealthEvent.objects.get(kind="nvswitch_nonfatal", nvswitch_port=9)
    host.refresh_from_db()
    assert (tenth.classification, host.state) == ("nvswitch_degraded", "cordoned")
    backend.inject_kernel_log(SXID_FATAL)
    agent.run_once()
    fatal = HealthEvent.objects.get(kind="nvswitch_fatal")
    host.refresh_from_db()
    assert (fatal.nvswitch, fatal.nvswitch_port, fatal.xid, fatal.classification) == ("0000:07:00.0", 32, 24007,
                                                                                     "nvswitch_fatal")
    assert host.state == "faulty" and "reboot_host" in fatal.applied["pending"]
    assert "SXid 24007" in fatal.message


def test_fabric_state_and_infiniband_signals_end_to_end(enrolled, host):
    """A GPU whose fabric registration did not complete is taken out of placement (the host stays); InfiniBand
    error counts add up per port (100 per hour on one port), and a third flap of one port within the hour cordons
    the host; Fabric Manager down cordons it too."""
    from apps.health.models import HealthEvent

    agent, backend = enrolled
    backend.inject("fabric_incomplete", gpu=3, message="GPU fabric state IN_PROGRESS, status 0")
    backend.inject("ib_port_errors", hca_device="mlx5_3", hca_port_number=1, count=60)
    backend.inject("ib_port_errors", hca_device="mlx5_4", hca_port_number=1, count=60)
    backend.inject("ib_link_flap", hca_device="mlx5_5", hca_port_number=1)
    backend.inject("ib_link_flap", hca_device="mlx5_5", hca_port_number=1)
    agent.run_once()
    assert sorted(HealthEvent.objects.values_list("kind", "classification")) == [
        ("fabric_incomplete", "fabric_not_ready"), ("ib_link_flap", "observe"), ("ib_link_flap", "observe"),
        ("ib_port_errors", "observe"), ("ib_port_errors", "observe")]
    host.refresh_from_db()
    assert host.state == "available" and Gpu.objects.get(host=host, index=3).health == "faulty"
    assert Gpu.objects.filter(host=host, health="faulty").count() == 1
    backend.inject("ib_port_errors", hca_device="mlx5_3", hca_port_number=1, count=40)  # 100 on mlx5_3 now
    agent.run_once()
    assert HealthEvent.objects.filter(kind="ib_port_errors").latest("created_at").classification == "fabric_degraded"
    host.refresh_from_db()
    assert host.state == "cordoned"
    backend.inject("ib_link_flap", hca_device="mlx5_5", hca_port_number=1)
    backend.inject("fabric_manager_down", message="nvidia-fabricmanager: failed")
    agent.run_once()
    flap = HealthEvent.objects.filter(kind="ib_link_flap").latest("created_at")
    fm = HealthEvent.objects.get(kind="fabric_manager_down")
    assert (flap.classification, flap.hca_port.device, fm.classification) == ("fabric_degraded", "mlx5_5",
                                                                              "fabric_not_ready")


def test_the_nvml_backends_collection_reaches_the_control_plane(enrolled, host, tmp_path):
    """The real collection path (NVML simulator, a kernel log and a sysfs tree in tmp_path) through the agent: an
    InfiniBand port's flaps and error counters and an NVSwitch SXid become events on that port / switch."""
    from gpucloud_agent.backends.nvml import NvmlBackend

    from apps.health.models import HealthEvent

    from .test_fabric_signals import FabricSim, ib_port, kmsg
    from .test_nvml_signals import backend as nvml_backend

    agent, _ = enrolled
    ib_port(tmp_path, "mlx5_3", symbol_error=0, link_downed=0)
    (tmp_path / "kmsg").write_text("")
    sim = FabricSim(gpus=8)
    sim.fabric = [(0, 0)] * 8  # no fabric registration to read: no Fabric Manager check
    agent.backend = nvml_backend(tmp_path, sim)
    assert isinstance(agent.backend, NvmlBackend) and agent.report_health() == 0
    ib_port(tmp_path, "mlx5_3", symbol_error=7, link_downed=3)
    (tmp_path / "kmsg").write_text(kmsg(41, SXID_FATAL.replace("nvswitch2", "nvswitch3").replace(":07:", ":08:")))
    assert agent.report_health() == 3
    got = sorted(HealthEvent.objects.values_list("kind", "count", "hca_port__device", "nvswitch", "classification"))
    assert got == [("ib_link_flap", 3, "mlx5_3", "", "fabric_degraded"), ("ib_port_errors", 7, "mlx5_3", "", "observe"),
                   ("nvswitch_fatal", 1, None, "0000:08:00.0", "nvswitch_fatal")]
    assert agent.report_health() == 0  # acknowledged: not sent again
