"""Limited (and full) InfiniBand membership through the API: `POST /ib-partitions/{id}/members` and
`DELETE /ib-partitions/{id}/members/{guid}`, with the shared-port rule of ADR 0704."""
import uuid

import pytest

from apps.networking import desired, services
from apps.networking.drivers.opensm import render_partitions
from apps.networking.models import IbPartitionMember
from tests.tenancy.helpers import client_for, token_for

from .helpers import host_with_hca, ib_fabric, operator_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def ib(tenant_a, tenant_b):
    """Tenant A: partitions `train` (an instance's host port joined it) and `storage`; tenant B: partition `b`
    with its own instance's port. A free gateway port on the fabric."""
    fabric = ib_fabric(pool=(0x0100, 0x01FF))
    train = services.ib_partition_create(actor=tenant_a.user, project=tenant_a.project, fabric=fabric, name="train")
    storage = services.ib_partition_create(actor=tenant_a.user, project=tenant_a.project, fabric=fabric,
                                           name="storage")
    pb = services.ib_partition_create(actor=tenant_b.user, project=tenant_b.project, fabric=fabric, name="b")
    host_a, host_b = host_with_hca(fabric), host_with_hca(fabric)
    inst_a, inst_b = uuid.uuid4(), uuid.uuid4()
    services.ib_partition_join_whole_host(actor=tenant_a.user, partition=train, host=host_a, instance_id=inst_a)
    services.ib_partition_join_whole_host(actor=tenant_b.user, partition=pb, host=host_b, instance_id=inst_b)
    gateway = host_with_hca(fabric).hca_ports.get()
    return type("Ib", (), dict(fabric=fabric, train=train, storage=storage, pb=pb, inst_a=inst_a,
                               guid_a=host_a.hca_ports.get().port_guid, guid_b=host_b.hca_ports.get().port_guid,
                               gateway=gateway.port_guid))


def _add(client, part, **body):
    return client.post(f"/api/v1/ib-partitions/{part.pk}/members", body, format="json")


def _remove(client, part, guid):
    return client.delete(f"/api/v1/ib-partitions/{part.pk}/members/{guid}")


def test_a_tenant_adds_its_own_instances_guid_as_a_limited_member_and_removes_it(tenant_a, ib):
    r = _add(tenant_a.client, ib.storage, guid=ib.guid_a)
    assert r.status_code == 201, r.json()
    assert [(m["guid"], m["membership"], m["instance_id"], m["added_via_api"]) for m in r.json()["members"]] == [
        (ib.guid_a, "limited", str(ib.inst_a), True)]
    spec = next(p for p in desired.ib_partitions(ib.fabric) if p.pkey == ib.storage.pkey)
    assert f"{ib.guid_a}=limited" in render_partitions([spec])
    # the same again is the same member; the other membership is a 409 until it is removed
    assert _add(tenant_a.client, ib.storage, guid=ib.guid_a.upper().replace("0X", "0x")).status_code == 201
    r = _add(tenant_a.client, ib.storage, guid=ib.guid_a, membership="full")
    assert r.status_code == 409 and r.json()["code"] == "already_member", r.json()
    assert ib.storage.members.count() == 1

    assert _remove(tenant_a.client, ib.storage, ib.guid_a).status_code == 204
    assert ib.storage.members.count() == 0
    assert _remove(tenant_a.client, ib.storage, ib.guid_a).status_code == 404
    # the instance's own membership leaves with the instance, not through this API
    r = _remove(tenant_a.client, ib.train, ib.guid_a)
    assert r.status_code == 409 and r.json()["code"] == "in_use", r.json()
    assert ib.train.members.count() == 1


def test_an_added_membership_leaves_with_its_instance(tenant_a, ib):
    assert _add(tenant_a.client, ib.storage, guid=ib.guid_a, membership="full").status_code == 201
    assert services.ib_partition_members_leave_instance(actor=tenant_a.user, instance_id=ib.inst_a) == 2
    assert IbPartitionMember.objects.filter(guid=ib.guid_a).count() == 0


def test_another_tenants_guid_and_partition_answer_like_missing_ones(tenant_a, tenant_b, ib):
    missing_guid = _add(tenant_a.client, ib.storage, guid="0x0c42a103ffff0001")
    foreign_guid = _add(tenant_a.client, ib.storage, guid=ib.guid_b)
    assert missing_guid.status_code == foreign_guid.status_code == 400
    assert missing_guid.json()["errors"] == foreign_guid.json()["errors"] == {"guid": ["Not found."]}
    assert missing_guid.json()["code"] == foreign_guid.json()["code"]
    # a shared service port staff put in A's partition is not A's own GUID either
    _user, staff = operator_client()
    assert _add(staff, ib.train, guid=ib.gateway).status_code == 201
    assert _add(tenant_a.client, ib.storage, guid=ib.gateway).json()["errors"] == {"guid": ["Not found."]}

    for path_part in (ib.pb, type("Missing", (), {"pk": uuid.uuid4()})):
        assert _add(tenant_a.client, path_part, guid=ib.guid_a).status_code == 404
        assert _remove(tenant_a.client, path_part, ib.guid_b).status_code == 404
    assert ib.pb.members.count() == 1 and ib.storage.members.count() == 0


@pytest.mark.parametrize("body, code, field", [
    ({"guid": "0xZZZ"}, "invalid_guid", "guid"),
    ({"guid": "0x0c42a10300000101ff"}, "invalid_guid", "guid"),
    ({"guid": "OWN", "membership": "both"}, "invalid_membership", "membership"),
    ({}, "validation_error", "guid"),
    ({"guid": "OWN", "pkey": "0x0101"}, "validation_error", "pkey"),
])
def test_bad_input_is_400_with_a_stable_code_and_writes_nothing(tenant_a, ib, body, code, field):
    body = {k: (ib.guid_a if v == "OWN" else v) for k, v in body.items()}
    before = IbPartitionMember.objects.count()
    r = _add(tenant_a.client, ib.storage, **body)
    assert r.status_code == 400, r.json()
    assert r.json()["code"] == code and field in r.json()["errors"], r.json()
    assert IbPartitionMember.objects.count() == before


def test_viewers_cannot_add_or_remove(tenant_a, ib):
    viewer = client_for(token_for(tenant_a.viewer, organization=tenant_a.org))
    assert _add(viewer, ib.storage, guid=ib.guid_a).status_code == 403
    assert _remove(viewer, ib.train, ib.guid_a).status_code == 403
    assert ib.storage.members.count() == 0 and ib.train.members.count() == 1


def test_staff_share_a_port_as_a_limited_member_only(tenant_a, tenant_b, ib):
    """Operators add any port of the fabric; one in two projects' partitions is limited in both (ADR 0704)."""
    _user, staff = operator_client()
    for part in (ib.storage, ib.pb):
        r = _add(staff, part, guid=ib.gateway)
        assert r.status_code == 201, r.json()
    assert sorted(IbPartitionMember.objects.filter(guid=ib.gateway).values_list("membership", flat=True)) == [
        "limited", "limited"]
    r = _add(staff, ib.train, guid=ib.gateway, membership="full")
    assert r.status_code == 409 and r.json()["code"] == "guid_in_other_project", r.json()
    # another project's instance port is a full member there: never shared, not even limited
    r = _add(staff, ib.storage, guid=ib.guid_b)
    assert r.status_code == 409 and r.json()["code"] == "guid_in_other_project", r.json()
    # a tenant may drop the shared port from its own partition (it only cuts its own access)
    assert _remove(tenant_a.client, ib.storage, ib.gateway).status_code == 204
    assert list(IbPartitionMember.objects.filter(guid=ib.gateway).values_list("partition", flat=True)) == [ib.pb.pk]


def test_a_guid_of_another_fabric_is_not_found(tenant_a, ib):
    other = ib_fabric("ib-other", pool=(0x0200, 0x02FF))
    part = services.ib_partition_create(actor=tenant_a.user, project=tenant_a.project, fabric=other, name="o")
    r = _add(tenant_a.client, part, guid=ib.guid_a)
    assert r.status_code == 400 and r.json()["errors"] == {"guid": ["Not found."]}, r.json()
