"""InfiniBand cases (docs/cases.md): RW-041 (valid keys, membership bit), RW-043 (keys per port), RW-044 (compare
15-bit keys, table index), RW-045 (virtual GUID pool bounds), RW-046 (partitions belong to one fabric)."""
import uuid

import pytest

from apps.core.errors import DomainError
from apps.inventory.models import HcaPort, Region, Switch
from apps.networking import pkeys, services
from apps.networking.models import IbPartition, IbPartitionMember, VirtualGuid
from tests.tenancy.helpers import client_for, token_for

from .helpers import host_with_hca, ib_fabric, operator

pytestmark = pytest.mark.django_db


def _create(tenant, fabric, name, pkey=None):
    data = {"project": str(tenant.project.pk), "fabric": fabric.name, "name": name}
    if pkey is not None:
        data["pkey"] = pkey
    return tenant.client.post("/api/v1/ib-partitions", data, format="json")


@pytest.mark.parametrize("value, status, stored_or_code", [
    ("0x0001", 201, 0x0001), ("0x7ffe", 201, 0x7FFE), ("0x8001", 201, 0x0001), ("32766", 201, 0x7FFE),
    ("0x0000", 400, "invalid_pkey"), ("0x8000", 400, "invalid_pkey"), ("0x7fff", 400, "pkey_reserved"),
    ("0xffff", 400, "pkey_reserved"), ("0x1ffff", 400, "invalid_pkey"), ("bogus", 400, "invalid_pkey"),
])
def test_rw041_pkey_values(tenant_a, value, status, stored_or_code):
    fabric = ib_fabric(pool=(0x0001, 0x7FFE))
    r = _create(tenant_a, fabric, "p", value)
    assert r.status_code == status, r.json()
    if status == 201:
        assert r.json()["pkey"] == stored_or_code and r.json()["pkey_hex"] == f"{stored_or_code:#06x}"
    else:
        assert r.json()["code"] == stored_or_code
        assert IbPartition.objects.count() == 0


def test_rw041_same_partition_with_and_without_membership_bit(tenant_a, tenant_b):
    fabric = ib_fabric(pool=(0x0100, 0x01FF))
    assert _create(tenant_a, fabric, "a", "0x8123").json()["pkey"] == 0x0123
    r = _create(tenant_b, fabric, "b", "0x0123")
    assert r.status_code == 409 and r.json()["code"] == "pkey_in_use"


def test_pool_bounds_exhaustion_and_out_of_pool(tenant_a):
    fabric = ib_fabric(pool=(0x0200, 0x0201))
    r = _create(tenant_a, fabric, "x", "0x0300")
    assert r.status_code == 400 and r.json()["code"] == "pkey_out_of_pool"
    assert [_create(tenant_a, fabric, n).json()["pkey"] for n in ("a", "b")] == [0x0200, 0x0201]
    r = _create(tenant_a, fabric, "c")
    assert r.status_code == 409 and r.json()["code"] == "pkey_pool_exhausted"
    assert IbPartition.objects.count() == 2


@pytest.mark.parametrize("first, last", [("0x0000", "0x0010"), ("0x0001", "0x7fff"), ("0x0100", "0x00ff"),
                                         ("0x0001", "0xffff")])
def test_operator_pool_must_be_inside_0001_7ffe(first, last):
    fabric = ib_fabric("ib-pool", pool=None)
    client = client_for(token_for(operator(), staff=True))
    r = client.post("/api/v1/pkey-pools", {"fabric": fabric.name, "first_pkey": first, "last_pkey": last})
    assert r.status_code == 400, r.json()
    assert r.json()["code"] in ("invalid_pkey_pool", "invalid_pkey", "pkey_reserved")
    ok = client.post("/api/v1/pkey-pools", {"fabric": fabric.name, "first_pkey": "0x0001", "last_pkey": "0x7ffe"})
    assert ok.status_code == 201 and (ok.json()["first_pkey"], ok.json()["last_pkey"]) == (1, 0x7FFE)


def test_partition_on_ethernet_fabric_or_without_pool(tenant_a):
    region = Region.objects.get_or_create(name="r1")[0]
    from apps.inventory.models import Fabric

    eth = Fabric.objects.create(name="eth-x", kind="ethernet", region=region)
    assert _create(tenant_a, eth, "p").status_code == 400           # not an InfiniBand fabric name
    bare = ib_fabric("ib-nopool", pool=None)
    r = _create(tenant_a, bare, "p")
    assert r.status_code == 409 and r.json()["code"] == "no_pkey_pool"


def test_rw043_per_port_limit(tenant_a, settings):
    tenant_a.quota("ib_partitions", 1000)
    fabric = ib_fabric(pool=(0x0001, 0x7FFE))
    host, other = host_with_hca(fabric), host_with_hca(fabric)
    parts = [services.ib_partition_create(actor=tenant_a.user, project=tenant_a.project, fabric=fabric, name=f"p{i}")
             for i in range(129)]
    port = host.hca_ports.get()
    for p in parts[:128]:
        services.ib_partition_member_join(actor=tenant_a.user, partition=p, hca_port=port)
    with pytest.raises(DomainError) as exc:
        services.ib_partition_member_join(actor=tenant_a.user, partition=parts[128], hca_port=port)
    assert exc.value.code == "pkey_limit_per_port"
    # the limit is per port, not per fabric: another node joins the 129th partition
    services.ib_partition_member_join(actor=tenant_a.user, partition=parts[128], hca_port=other.hca_ports.get())
    assert IbPartitionMember.objects.count() == 129


def test_rw044_compare_15_bit_keys_and_find_the_index():
    assert pkeys.same_partition(0x8123, 0x0123) and not pkeys.same_partition(0x8123, 0x0124)
    assert pkeys.pkey_index([0xFFFF, 0x8123, 0x0000], 0x0123) == 1
    assert pkeys.pkey_index([0x7FFF, 0x0000, 0x0123], 0x8123) == 2
    assert pkeys.pkey_index([0x7FFF], 0x0123) is None


def test_rw045_virtual_guid_pool_bounds_and_reuse_after_sm_removal(tenant_a):
    fabric = ib_fabric(pool=(0x0100, 0x01FF))
    host = host_with_hca(fabric)
    port = host.hca_ports.get()
    services.virtual_guid_pool_set(actor=None, hca_port=port, first_guid="02:00:00:00:00:00:00:00", size=256)
    part = services.ib_partition_create(actor=tenant_a.user, project=tenant_a.project, fabric=fabric, name="vf")
    instances = [uuid.uuid4() for _ in range(257)]
    for inst in instances[:256]:
        services.ib_partition_join_vf(actor=tenant_a.user, partition=part, hca_port=port, instance_id=inst)
    guids = [int(g, 16) for g in VirtualGuid.objects.values_list("guid", flat=True)]
    assert len(set(guids)) == 256
    assert min(guids) == 0x0200000000000000 and max(guids) == 0x02000000000000FF
    with pytest.raises(DomainError) as exc:
        services.ib_partition_join_vf(actor=tenant_a.user, partition=part, hca_port=port, instance_id=instances[256])
    assert exc.value.code == "guid_pool_exhausted"

    services.ib_partition_members_leave_instance(actor=tenant_a.user, instance_id=instances[0])
    freed = VirtualGuid.objects.get(instance_id=instances[0])
    assert freed.status == "releasing"
    with pytest.raises(DomainError):       # not reusable until the SM no longer holds it
        services.ib_partition_join_vf(actor=tenant_a.user, partition=part, hca_port=port, instance_id=instances[256])
    applied = set(IbPartitionMember.objects.values_list("guid", flat=True))
    assert services.virtual_guids_free_released(fabric=fabric, applied_guids=applied) == 1
    member = services.ib_partition_join_vf(actor=tenant_a.user, partition=part, hca_port=port,
                                           instance_id=instances[256])
    assert member.guid == "0x0200000000000000"


def test_guid_pool_may_not_overlap_or_hold_a_physical_guid():
    fabric = ib_fabric(pool=None)
    p1, p2 = host_with_hca(fabric).hca_ports.get(), host_with_hca(fabric).hca_ports.get()
    services.virtual_guid_pool_set(actor=None, hca_port=p1, first_guid="0x0200000000000000", size=256)
    with pytest.raises(DomainError) as exc:
        services.virtual_guid_pool_set(actor=None, hca_port=p2, first_guid="0x02000000000000ff", size=16)
    assert exc.value.code == "guid_pool_overlap"
    with pytest.raises(DomainError) as exc:
        services.virtual_guid_pool_set(actor=None, hca_port=p2, first_guid=p1.port_guid, size=1)
    assert exc.value.code == "guid_pool_overlap"


def test_rw046_partitions_belong_to_one_fabric(tenant_a, tenant_b):
    f1, f2 = ib_fabric("ib-f1", pool=(0x0100, 0x01FF)), ib_fabric("ib-f2", pool=(0x0100, 0x01FF))
    assert _create(tenant_a, f1, "a", "0x0100").status_code == 201
    assert _create(tenant_b, f2, "b", "0x0100").status_code == 201      # same key, other fabric: fine
    part_a = IbPartition.objects.get(fabric=f1)
    machine = host_with_hca(f2)
    with pytest.raises(DomainError) as exc:
        services.ib_partition_join_whole_host(actor=tenant_a.user, partition=part_a, host=machine,
                                              instance_id=uuid.uuid4())
    assert exc.value.code == "wrong_fabric"
    with pytest.raises(DomainError) as exc:
        services.ib_partition_member_join(actor=tenant_a.user, partition=part_a, hca_port=machine.hca_ports.get())
    assert exc.value.code == "wrong_fabric"
    # the database refuses one GUID on two fabrics (port GUIDs are unique in inventory)
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        HcaPort.objects.create(host=machine, device="mlx5_9", port_guid=machine.hca_ports.get().port_guid, fabric=f1)


def test_guid_in_another_projects_partition_is_refused(tenant_a, tenant_b):
    fabric = ib_fabric(pool=(0x0100, 0x01FF))
    host = host_with_hca(fabric, ports=2)
    pa = services.ib_partition_create(actor=tenant_a.user, project=tenant_a.project, fabric=fabric, name="a")
    pb = services.ib_partition_create(actor=tenant_b.user, project=tenant_b.project, fabric=fabric, name="b")
    services.ib_partition_join_whole_host(actor=tenant_a.user, partition=pa, host=host, instance_id=uuid.uuid4())
    with pytest.raises(DomainError) as exc:
        services.ib_partition_join_whole_host(actor=tenant_b.user, partition=pb, host=host, instance_id=uuid.uuid4())
    assert exc.value.code == "guid_in_other_project"
    assert IbPartitionMember.objects.filter(partition=pb).count() == 0


def test_partition_api_shows_members_and_hides_other_tenants(tenant_a, tenant_b):
    fabric = ib_fabric(pool=(0x0100, 0x01FF))
    leaf = Switch.objects.create(name="leaf-x", fabric=fabric, role="leaf")
    host = host_with_hca(fabric, ports=2, leaf=leaf)
    r = _create(tenant_a, fabric, "train")
    part = IbPartition.objects.get(pk=r.json()["id"])
    inst = uuid.uuid4()
    services.ib_partition_join_whole_host(actor=tenant_a.user, partition=part, host=host, instance_id=inst)
    body = tenant_a.client.get(f"/api/v1/ib-partitions/{part.pk}").json()
    assert sorted(m["guid"] for m in body["members"]) == sorted(p.port_guid for p in host.hca_ports.all())
    assert {m["membership"] for m in body["members"]} == {"full"}
    assert tenant_b.client.get(f"/api/v1/ib-partitions/{part.pk}").status_code == 404
    assert tenant_a.client.delete(f"/api/v1/ib-partitions/{part.pk}").json()["code"] == "in_use"
    services.ib_partition_members_leave_instance(actor=tenant_a.user, instance_id=inst)
    assert tenant_a.client.delete(f"/api/v1/ib-partitions/{part.pk}").status_code == 204
