"""The partitions file as OpenSM sees it, and ports shared by several tenants.

Why: with partitions.conf deleted (or unreadable, or unparsable) OpenSM falls back to ``Default=0x7fff :
ALL=full`` - every port a full member of one partition, so hosts of different tenants can talk. Before this was
fixed, the next reconcile silently wrote a new file: no alarm, no audit event, no record (drift was only looked
for when a file existed). Each of these states is drift now: recorded, audited, counted for Prometheus, and the
last good file is back at once.

A storage gateway serves several tenants: it must be able to be a *limited* member of each tenant's partition
(limited members cannot talk to each other, so the tenants stay apart), added by staff; it must never be a full
member of two tenants' partitions. These tests use OpenSmDriver with a stand-in parser on a temporary directory;
the same paths against real OpenSM on ibsim are in ``tests/drivers/contract/test_opensm_ibsim.py``.
"""
import uuid

import pytest

from apps.audit.models import AuditEvent
from apps.core.errors import DomainError
from apps.networking import services
from apps.networking.drivers.base import PartitionMemberSpec, PartitionSpec
from apps.networking.drivers.opensm import OpenSmDriver
from apps.networking.models import FabricDriftEvent, IbPartitionMember
from apps.networking.services.reconcile import ib_fabric_reconcile

from .helpers import host_with_hca, ib_fabric, operator, operator_client

pytestmark = pytest.mark.django_db
SPECS = [PartitionSpec("t", 0x101, (PartitionMemberSpec("0x0c42a10300aa0001", "full"),))]


def _parser(text: str) -> tuple[bool, list[str]]:
    """Stands in for OpenSM's parser: a file is valid when every statement is terminated and the default
    partition is there (what a real PARSE ERROR catches in these cases)."""
    ok = text.startswith("#") and "Default=0x7fff" in text and text.rstrip().endswith(";")
    return ok, [] if ok else ["PARSE ERROR: stand-in"]


def _driver(tmp_path) -> OpenSmDriver:
    return OpenSmDriver(partitions_path=str(tmp_path / "partitions.conf"), validator=_parser)


@pytest.mark.parametrize("damage, reason", [
    (lambda p: p.unlink(), "missing"),
    (lambda p: p.write_bytes(b"\xff\xfe not utf-8"), "unreadable"),
    (lambda p: p.write_text("Default=0x7fff : ALL=full\n"), "invalid"),
    (lambda p: p.write_text(p.read_text() + "# edited by hand ;\n"), "modified"),
])
def test_damaged_file_is_drift_and_the_last_good_file_is_back(tmp_path, damage, reason):
    driver = _driver(tmp_path)
    driver.apply(SPECS)
    good = driver.path.read_text()
    damage(driver.path)
    result = driver.apply(SPECS)
    assert (result.drift, result.drift_reason, result.restored) == (True, reason, True)
    assert driver.path.read_text() == good
    again = driver.apply(SPECS)
    assert (again.drift, again.writes) == (False, 0)


def test_both_files_gone_after_an_apply_is_drift_when_the_caller_applied_before(tmp_path):
    driver = _driver(tmp_path)
    driver.apply(SPECS)
    driver.path.unlink()
    driver.last_good_path.unlink()
    result = driver.apply(SPECS, expect_file=True)
    assert (result.drift, result.drift_reason, result.writes) == (True, "missing", 1)
    (tmp_path / "fresh").mkdir()
    first = _driver(tmp_path / "fresh").apply(SPECS)     # a fresh install has nothing to drift from
    assert first.drift is False


def test_reconcile_records_alarms_and_audits_a_deleted_file(tmp_path, client):
    fabric = ib_fabric("ib-drift")
    driver = _driver(tmp_path)
    assert ib_fabric_reconcile(fabric_id=fabric.pk, driver=driver, verify=False)["drift"] is False
    assert FabricDriftEvent.objects.count() == 0
    driver.path.unlink()
    out = ib_fabric_reconcile(fabric_id=fabric.pk, driver=driver, verify=False)
    assert (out["drift"], out["drift_reason"], out["restored"]) == (True, "missing", True)
    event = FabricDriftEvent.objects.get()
    assert (event.key, event.fabric_id, event.reason, event.restored) == ("ib:ib-drift", fabric.pk, "missing", True)
    audit = AuditEvent.objects.get(action="networking.ib_fabric.partitions_drift")
    assert audit.target_id == str(fabric.pk) and audit.after["reason"] == "missing"
    text = client.get("/metrics").content.decode()
    assert 'gpucloud_ib_partitions_drift_events{fabric="ib-drift"} 1.0' in text
    assert 'gpucloud_ib_partitions_last_drift_timestamp_seconds{fabric="ib-drift"}' in text
    assert ib_fabric_reconcile(fabric_id=fabric.pk, driver=driver, verify=False)["drift"] is False
    assert FabricDriftEvent.objects.count() == 1


def _two_partitions(tenant_a, tenant_b):
    fabric = ib_fabric(pool=(0x0100, 0x01FF))
    pa = services.ib_partition_create(actor=tenant_a.user, project=tenant_a.project, fabric=fabric, name="a")
    pb = services.ib_partition_create(actor=tenant_b.user, project=tenant_b.project, fabric=fabric, name="b")
    gateway = host_with_hca(fabric).hca_ports.get()
    return fabric, pa, pb, gateway


def test_staff_make_a_service_port_a_limited_member_of_two_tenants_partitions(tenant_a, tenant_b):
    _fabric, pa, pb, gateway = _two_partitions(tenant_a, tenant_b)
    staff = operator()
    services.ib_partition_service_port_join(actor=staff, partition=pa, hca_port=gateway)
    services.ib_partition_service_port_join(actor=staff, partition=pb, hca_port=gateway)
    rows = IbPartitionMember.objects.filter(guid=gateway.port_guid)
    assert sorted((m.partition.name, m.membership) for m in rows) == [("a", "limited"), ("b", "limited")]
    # never a full member next to it, for a tenant or for staff
    for actor in (tenant_a.user, staff):
        with pytest.raises(DomainError) as exc:
            services.ib_partition_member_join(actor=actor, partition=pa, hca_port=gateway, membership="full")
        assert exc.value.code == "guid_in_other_project"
    assert rows.count() == 2


def test_a_tenant_cannot_share_a_port_and_a_full_member_is_never_shared(tenant_a, tenant_b):
    _fabric, pa, pb, gateway = _two_partitions(tenant_a, tenant_b)
    services.ib_partition_member_join(actor=tenant_a.user, partition=pa, hca_port=gateway, membership="limited")
    with pytest.raises(DomainError) as exc:        # a tenant never reaches into another tenant's port
        services.ib_partition_member_join(actor=tenant_b.user, partition=pb, hca_port=gateway, membership="limited")
    assert exc.value.code == "guid_in_other_project"
    other = host_with_hca(pa.fabric).hca_ports.get()
    services.ib_partition_member_join(actor=tenant_a.user, partition=pa, hca_port=other)     # full in a
    with pytest.raises(DomainError) as exc:
        services.ib_partition_service_port_join(actor=operator(), partition=pb, hca_port=other)
    assert exc.value.code == "guid_in_other_project"
    with pytest.raises(DomainError) as exc:
        services.ib_partition_service_port_join(actor=tenant_a.user, partition=pa, hca_port=gateway)
    assert exc.value.status == 403
    assert IbPartitionMember.objects.filter(partition=pb).count() == 0


def test_service_port_api_is_for_staff_operators(tenant_a, tenant_b):
    _fabric, pa, pb, gateway = _two_partitions(tenant_a, tenant_b)
    _user, staff = operator_client()
    for part in (pa, pb):
        r = staff.post(f"/api/v1/ib-partitions/{part.pk}/service-ports", {"hca_port": str(gateway.pk)},
                       format="json")
        assert r.status_code == 201, r.json()
        assert [(m["guid"], m["membership"]) for m in r.json()["members"]] == [(gateway.port_guid, "limited")]
    r = tenant_a.client.post(f"/api/v1/ib-partitions/{pa.pk}/service-ports", {"hca_port": str(uuid.uuid4())},
                             format="json")
    assert r.status_code == 404
    assert IbPartitionMember.objects.count() == 2
