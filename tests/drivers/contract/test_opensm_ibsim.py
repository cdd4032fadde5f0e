"""OpenSM adapter contract on ibsim: a topology generated from the sample fleet's inventory (its switches and
HCA port GUIDs), OpenSM running on it, partitions reconciled from the database and read back with smpquery."""
import uuid

import pytest

from apps.core.drivers import DriverError
from apps.inventory.models import HcaPort, Host, Switch
from apps.networking import services, tasks
from apps.networking.drivers.base import PartitionMemberSpec, PartitionSpec
from apps.networking.drivers.ibsim import validate_with_opensm
from apps.networking.drivers.opensm import OpenSmDriver, parse_pkey_table, render_partitions
from apps.networking.models import FabricSyncState
from apps.networking.services.reconcile import ib_fabric_reconcile
from tests.networking.fabrics import load_sample_fleet, require_ibsim, sim_config, start_sim
from tests.networking.helpers import Tenant, host_with_hca, ib_fabric

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


@pytest.fixture
def sim(db):
    require_ibsim()
    fabric = load_sample_fleet()
    sim = start_sim(fabric)
    yield fabric, sim
    sim.cleanup()


def _table(driver, guid) -> set[int]:
    return set(driver.read_pkeys(guid))


def test_sample_fleet_partitions_isolate_projects_and_reconcile_is_idempotent(sim, settings):
    fabric, fab = sim
    driver = OpenSmDriver(partitions_path=str(fab.partitions_path), env=sim_config(fab)["env"])
    guids = list(HcaPort.objects.filter(fabric=fabric).order_by("port_guid").values_list("port_guid", flat=True))
    assert len(guids) == 512
    for guid in (guids[0], guids[255], guids[-1]):       # inventory GUIDs answer on the simulated fabric
        assert _table(driver, guid) == {0x7FFF}           # default partition, limited member only
    settings.NETWORKING_IB_FABRICS = {"ib-compute": sim_config(fab)}
    services.pkey_pool_set(actor=None, fabric=fabric, first_pkey="0x0100", last_pkey="0x01ff")
    a, b = Tenant("ib-a"), Tenant("ib-b")
    pa = services.ib_partition_create(actor=a.user, project=a.project, fabric=fabric, name="train", mtu=4096,
                                      rate_gbps=400, sl=0)
    pb = services.ib_partition_create(actor=b.user, project=b.project, fabric=fabric, name="train")
    assert pa.pkey != pb.pkey
    host_a, host_b, idle = Host.objects.order_by("name")[:3]
    inst_a, inst_b = uuid.uuid4(), uuid.uuid4()
    services.ib_partition_join_whole_host(actor=a.user, partition=pa, host=host_a, instance_id=inst_a)
    services.ib_partition_join_whole_host(actor=b.user, partition=pb, host=host_b, instance_id=inst_b)

    first = tasks.ib_fabric_reconcile_task.delay(str(fabric.pk)).get()
    assert first["writes"] == 1 and first["mismatches"] == {}
    assert len(first["verified"]) >= 16
    for port in host_a.hca_ports.all():
        assert _table(driver, port.port_guid) == {0x7FFF, 0x8000 | pa.pkey}
    for port in host_b.hca_ports.all():
        assert _table(driver, port.port_guid) == {0x7FFF, 0x8000 | pb.pkey}
    for port in idle.hca_ports.all():
        assert _table(driver, port.port_guid) == {0x7FFF}
    text = fab.partitions_path.read_text()
    assert f"={pa.pkey:#06x}, ipoib, mtu=5, rate=21, sl=0 :" in text

    mtime = fab.partitions_path.stat().st_mtime_ns
    second = ib_fabric_reconcile(fabric_id=fabric.pk)
    assert (second["writes"], second["changed"], second["mismatches"]) == (0, False, {})
    assert fab.partitions_path.stat().st_mtime_ns == mtime

    # deleting the instance removes its GUIDs after reconcile
    assert services.ib_partition_members_leave_instance(actor=a.user, instance_id=inst_a) == 8
    third = ib_fabric_reconcile(fabric_id=fabric.pk)
    assert third["writes"] == 1 and third["mismatches"] == {}
    assert driver.wait_applied({p.port_guid: {0x7FFF} for p in host_a.hca_ports.all()}) == {}
    assert FabricSyncState.objects.get(key="ib:ib-compute").last_error == ""


@pytest.fixture
def small_sim(db):
    """One leaf, four single-port hosts: enough for the file-handling cases, quicker than the sample fleet."""
    require_ibsim()
    fabric = ib_fabric("ib-small", pool=None)
    leaf = Switch.objects.create(name="small-leaf", fabric=fabric, role="leaf", port_count=36)
    for _ in range(4):
        host_with_hca(fabric, leaf=leaf)
    sim = start_sim(fabric)
    yield fabric, sim
    sim.cleanup()


def _one_partition_applied(small_sim, settings, tenant: str):
    """One tenant's partition with the first host joined, reconciled onto the fabric. Returns (fabric, simulated
    fabric, partition, host, the partitions file as written)."""
    fabric, fab = small_sim
    settings.NETWORKING_IB_FABRICS = {"ib-small": sim_config(fab)}
    services.pkey_pool_set(actor=None, fabric=fabric, first_pkey=0x200, last_pkey=0x2FF)
    t = Tenant(tenant)
    part = services.ib_partition_create(actor=t.user, project=t.project, fabric=fabric, name="p")
    host = Host.objects.order_by("name").first()
    services.ib_partition_join_whole_host(actor=t.user, partition=part, host=host, instance_id=uuid.uuid4())
    ib_fabric_reconcile(fabric_id=fabric.pk)
    return fabric, fab, part, host, fab.partitions_path.read_text()


def test_hand_corrupted_file_is_detected_and_replaced(small_sim, settings):
    fabric, fab, part, host, good = _one_partition_applied(small_sim, settings, "ib-c")

    corrupted = good.replace(" ;", "", 1)           # drop a terminator: OpenSM would fall back to ALL=full
    fab.partitions_path.write_text(corrupted)
    ok, messages = validate_with_opensm(corrupted)
    assert not ok and any("PARSE ERROR" in m for m in messages)
    result = ib_fabric_reconcile(fabric_id=fabric.pk)
    assert result["drift"] is True and result["restored"] is True and result["writes"] == 1
    assert fab.partitions_path.read_text() == good
    assert (fab.partitions_path.parent / "partitions.conf.last-good").read_text() == good
    driver = OpenSmDriver(partitions_path=str(fab.partitions_path), env=sim_config(fab)["env"])
    assert driver.wait_applied({p.port_guid: {0x7FFF, 0x8000 | part.pkey} for p in host.hca_ports.all()}) == {}


def test_deleted_file_is_drift_alarmed_audited_and_restored_at_once(small_sim, settings):
    """Without partitions.conf OpenSM makes every port a full member of the default partition: the reconcile
    must treat it as drift (event, audit) and put the last good file back, not silently write a new one."""
    from apps.audit.models import AuditEvent
    from apps.networking.models import FabricDriftEvent

    fabric, fab, part, host, good = _one_partition_applied(small_sim, settings, "ib-d")

    fab.partitions_path.unlink()
    result = ib_fabric_reconcile(fabric_id=fabric.pk)
    assert (result["drift"], result["drift_reason"], result["restored"]) == (True, "missing", True)
    assert fab.partitions_path.read_text() == good
    assert FabricDriftEvent.objects.filter(key="ib:ib-small", reason="missing", restored=True).count() == 1
    assert AuditEvent.objects.filter(action="networking.ib_fabric.partitions_drift",
                                     target_id=str(fabric.pk)).count() == 1
    driver = OpenSmDriver(partitions_path=str(fab.partitions_path), env=sim_config(fab)["env"])
    assert driver.wait_applied({p.port_guid: {0x7FFF, 0x8000 | part.pkey} for p in host.hca_ports.all()}) == {}
    others = HcaPort.objects.filter(fabric=fabric).exclude(host=host)
    assert driver.wait_applied({p.port_guid: {0x7FFF} for p in others}) == {}     # limited default only


def test_validator_uses_opensms_parser():
    require_ibsim()
    good = render_partitions([PartitionSpec("t", 0x123, (PartitionMemberSpec("0x0c42a10300aa0001", "full"),))])
    assert validate_with_opensm(good) == (True, [])
    for bad in ("Default=0x7fff : ALL=full ;\nt=0x0101 : 0x0c42a10300aa0001=full\nu=0x0102 : 0x0c42a10300aa0003 ;\n",
                "Default=0x7fff : ALL=full ;\nt=0x0101 : 0xZZZ=full ;\n"):
        ok, messages = validate_with_opensm(bad)
        assert not ok and messages


def test_invalid_render_never_reaches_the_file(tmp_path):
    path = tmp_path / "partitions.conf"
    driver = OpenSmDriver(partitions_path=str(path), validator=lambda text: (False, ["PARSE ERROR: test"]))
    with pytest.raises(DriverError) as exc:
        driver.apply([PartitionSpec("t", 0x101)])
    assert exc.value.code == "partitions_invalid"
    assert not path.exists()
    for bad in (0x0000, 0x7FFF, 0x8101):
        with pytest.raises(DriverError):
            render_partitions([PartitionSpec("t", bad)])
    with pytest.raises(DriverError):
        render_partitions([PartitionSpec("t", 0x101, (PartitionMemberSpec("100001", "full"),))])  # no 0x: decimal


def test_smpquery_table_parser():
    text = "   0: 0x7fff 0x8101 0x0000 0x0202\n   8: 0x0000 0x0000\n64 pkeys capacity for this port\n"
    assert parse_pkey_table(text) == [0x7FFF, 0x8101, 0x0202]


def test_rw043_fabric_with_500_partitions_is_accepted():
    """RW-043: the 128-keys limit is per port; a fabric with 500 partitions (no port in more than 128) renders
    and passes OpenSM's parser."""
    require_ibsim()
    specs = [PartitionSpec(f"t{i}", 0x0100 + i, tuple(PartitionMemberSpec(f"0x0c42a103{i:04x}{j:04x}", "full")
                                                     for j in range(4)), ipoib=True) for i in range(500)]
    text = render_partitions(specs)
    assert text.count(" ;") == 501
    assert validate_with_opensm(text) == (True, [])
