"""Clusters of a bare-metal flavor through the same POST /clusters as VMs (fake bare-metal driver, real runner,
real ledger): N whole hosts placed as one gang by the placement engine (one InfiniBand fabric, the tenant's
`topology` limits), each deployed by the bare-metal workflow, every HCA port GUID of every member joining the
cluster's partition; a cluster delete undeploys and cleans every host with a receipt each; a member whose deploy
fails takes the cluster down whole: no allocation and no partition member is left."""
from __future__ import annotations

import pytest

from apps.baremetal.models import BaremetalNode, ExitReceipt
from apps.compute.models import Cluster, Instance
from apps.core.clock import now
from apps.inventory.models import HcaPort, Host
from apps.networking import services as net
from apps.networking.models import IbPartitionMember
from apps.operations.models import Operation
from apps.scheduling.models import Allocation
from tests.reservations.conftest import gpu_quota
from tests.scheduling import fleet

from .conftest import bm_host, drive, enroll

pytestmark = pytest.mark.django_db


@pytest.fixture
def fabric(world, bm_driver, settings):
    """Fabric `ib-bm` (no subnet manager configured: the receipts say the removal is unverified), tenant A's
    partition on it, and four enrolled bare-metal hosts in two scalable units (2 rails, one leaf per rail each)."""
    from apps.tenancy.models import Quota

    gpu_quota(world.org_a, 64)
    for resource in ("vcpus", "memory_mib", "instances"):  # four whole hosts may be the tenant's
        Quota.objects.update_or_create(organization=world.org_a, project=None, resource=resource,
                                       defaults={"limit": 10**9})
    settings.NETWORKING_IB_FABRICS = {}
    fab = fleet.ib_fabric("ib-bm")
    net.pkey_pool_set(actor=None, fabric=fab, first_pkey=0x0100, last_pkey=0x01FF)
    part = net.ib_partition_create(actor=world.member_a, project=world.project_a, fabric=fab, name="train")
    hosts = []
    for su_name in ("su-x", "su-y"):
        su, leaves = fleet.su_with_leaves(su_name, rails=2, fabric=fab)
        for _ in range(2):
            h = bm_host()
            h.scalable_unit = su
            h.save(update_fields=["scalable_unit"])
            fleet.cable(h, leaves, fabric=fab)
            _node_id, op = enroll(world.staff_client, h)
            assert op.status == "succeeded"
            hosts.append(h)
    return type("F", (), dict(fabric=fab, part=part, hosts=hosts))


def _cluster(world, flavor, fabric, size=2, **extra):
    return world.client_a.post("/api/v1/clusters/", {
        "project": str(world.project_a.pk), "name": "train", "flavor": str(flavor.pk), "image": str(world.image.pk),
        "size": size, "ib_partition_id": str(fabric.part.pk), **extra}, format="json")


def _live(ids) -> int:
    return Allocation.objects.filter(consumer_id__in=list(ids), period__contains=now()).count()


def _members_created(cluster):
    assert drive(Operation.objects.get(kind="cluster.create", target_id=cluster.pk).pk).status == "succeeded"
    return list(cluster.members.order_by("name"))


def test_a_bare_metal_cluster_is_placed_on_one_leaf_per_rail_joined_to_the_partition_and_deleted_with_receipts(
        world, bm_driver, bm_flavor, fabric):
    r = _cluster(world, bm_flavor, fabric, topology={"max_leaves_per_rail": 1})
    assert r.status_code == 201, r.content
    cluster = Cluster.objects.get(pk=r.data["id"])
    members = _members_created(cluster)
    su = {h.pk: h.scalable_unit_id for h in fabric.hosts}
    assert len({m.host_id for m in members}) == 2 and len({su[m.host_id] for m in members}) == 1
    ops = list(Operation.objects.filter(target_id__in=[m.pk for m in members]))
    assert {op.kind for op in ops} == {"baremetal.instance.create"}
    for op in ops:
        assert drive(op.pk).status == "succeeded"
    cluster.refresh_from_db()
    assert cluster.status == "active"
    for m in members:
        m.refresh_from_db()
        assert m.status == "active"
        assert Allocation.objects.filter(consumer_id=m.pk, resource_class="gpu", period__contains=now()).count() == 8
        guids = sorted(HcaPort.objects.filter(host_id=m.host_id).values_list("port_guid", flat=True))
        assert len(guids) == 2 and sorted(IbPartitionMember.objects.filter(
            instance_id=m.pk, partition=fabric.part).values_list("guid", flat=True)) == guids
        node = BaremetalNode.objects.get(host_id=m.host_id)
        assert bm_driver.get(node.ironic_id).instance_id == str(m.pk)
    shown = world.client_a.get(f"/api/v1/clusters/{cluster.pk}/").json()
    assert shown["status"] == "active"

    assert world.client_a.delete(f"/api/v1/clusters/{cluster.pk}/").status_code == 202
    deletes = list(Operation.objects.filter(kind="baremetal.instance.delete"))
    assert len(deletes) == 2
    for op in deletes:
        assert drive(op.pk).status == "succeeded"
    cluster.refresh_from_db()
    assert cluster.status == "deleted"
    ids = [m.pk for m in members]
    assert _live(ids) == 0 and not IbPartitionMember.objects.filter(instance_id__in=ids).exists()
    assert ExitReceipt.objects.filter(instance_id__in=ids).count() == 2
    assert all(Host.objects.get(pk=m.host_id).state == "available" for m in members)


def test_a_topology_no_set_of_bare_metal_hosts_meets_is_a_400(world, bm_driver, bm_flavor, fabric):
    r = _cluster(world, bm_flavor, fabric, size=3, topology={"max_leaves_per_rail": 1})
    assert (r.status_code, r.json()["code"]) == (400, "topology_constraint_impossible")
    assert r["Content-Type"].startswith("application/problem+json")
    assert not Cluster.objects.exists() and not Instance.objects.exists()


def test_a_member_whose_deploy_fails_takes_the_cluster_down_with_nothing_left(world, bm_driver, bm_flavor, fabric):
    r = _cluster(world, bm_flavor, fabric, size=2)
    assert r.status_code == 201, r.content
    cluster = Cluster.objects.get(pk=r.data["id"])
    good, bad = _members_created(cluster)
    bm_driver.fail_next(BaremetalNode.objects.get(host_id=bad.host_id).ironic_id, "deploy")
    good_op = Operation.objects.get(target_id=good.pk, kind="baremetal.instance.create")
    assert drive(good_op.pk).status == "succeeded"
    assert IbPartitionMember.objects.filter(instance_id=good.pk).exists()
    bad_op = drive(Operation.objects.get(target_id=bad.pk, kind="baremetal.instance.create").pk)
    assert bad_op.status == "failed"
    cluster.refresh_from_db()
    assert (cluster.status, cluster.error_code) == ("error", bad_op.error_code)
    bad.refresh_from_db()
    good.refresh_from_db()
    assert (bad.status, good.status) == ("error", "deleting")
    for op in Operation.objects.filter(kind__in=("baremetal.instance.delete", "baremetal.node.recover")):
        assert drive(op.pk).status == "succeeded"
    ids = [good.pk, bad.pk]
    assert _live(ids) == 0 and not IbPartitionMember.objects.filter(instance_id__in=ids).exists()
    assert Instance.objects.get(pk=good.pk).status == "deleted"
    assert ExitReceipt.objects.filter(instance_id=good.pk).count() == 1
    assert all(Host.objects.get(pk=h.pk).state == "available" for h in fabric.hosts)
    assert world.client_a.delete(f"/api/v1/clusters/{cluster.pk}/").status_code == 202
    for op in Operation.objects.filter(kind="baremetal.instance.delete", finished_at__isnull=True):
        drive(op.pk)
    cluster.refresh_from_db()
    assert cluster.status == "deleted"
