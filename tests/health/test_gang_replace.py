"""The gang re-place of a cluster member, end to end through the fake backends with explicit times (ADR 0217): an
XID 79 on a member's host → the member's remediation, under the project's consent mode → re-created on a host
that joins the other members' topology (the cluster's InfiniBand fabric, its rail/leaf limit, never a host of
another member), with the same name, port, addresses and partition membership; the other members keep running
and the notice names them. Without such a host the member waits where it runs and says why, and moves once one is
free."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine

from apps.compute.models import Cluster, Instance
from apps.health.models import Remediation
from apps.health.services.remediation import remediations_advance
from apps.inventory.models import HcaPort
from apps.networking.models import IbPartitionMember
from apps.operations.models import Operation
from apps.reservations.models import Notification
from apps.scheduling.models import Allocation, Consumer
from apps.scheduling.placement.topology import topology_cache_clear
from apps.tenancy.models import Quota
from tests.billing.conftest import tiers  # noqa: F401  (fixture)
from tests.compute.conftest import gpu_host
from tests.scheduling import fleet

from .test_remediation import FAULT, T0, _finish, _network_view, _policy, _xid79, setup  # noqa: F401

pytestmark = pytest.mark.django_db


def _cluster(world, s, *, topology=None) -> Cluster:
    Quota.objects.filter(organization=world.org_a, resource="gpus").update(limit=64)
    with time_machine.travel(T0, tick=False):
        body = {"project": str(world.project_a.pk), "name": "gang", "flavor": str(s.flavor.pk),
                "image": str(world.image.pk), "size": 2, "subnet_id": str(s.subnet.pk),
                "security_group_ids": [str(s.sg.pk)], "ib_partition_id": str(s.part.pk),
                **({"topology": topology} if topology else {})}
        r = world.client_a.post("/api/v1/clusters/", body, format="json")
        assert r.status_code == 201, r.content
        assert _finish(Operation.objects.get(kind="cluster.create").pk, s.hosts).status == "succeeded"
        for op in Operation.objects.filter(kind="instance.create"):
            assert _finish(op.pk, s.hosts).status == "succeeded"
    cluster = Cluster.objects.get(pk=r.json()["id"])
    assert cluster.status == "active" and {m.host_id for m in cluster.members.all()} == {h.pk for h in s.hosts}
    return cluster


def _other_su_host(s, name="su-far"):
    """A host on the cluster's fabric but under other leaf switches (another scalable unit)."""
    fabric = HcaPort.objects.filter(host=s.hosts[0]).first().fabric
    su, leaves = fleet.su_with_leaves(name, rails=2, fabric=fabric)
    h = gpu_host(gpus=8, su=su)
    fleet.cable(h, leaves, fabric=fabric)
    topology_cache_clear()  # cabled outside a fleet import (which bumps the topology stamp)
    return h


def test_a_lost_member_is_re_placed_on_the_clusters_fabric_with_its_identity(world, setup):  # noqa: F811
    s = setup
    _policy(world, "auto", notice=600)
    cluster = _cluster(world, s)
    lost = cluster.members.get(name="gang-0")
    peer = cluster.members.get(name="gang-1")
    failed, peer_host = lost.host, peer.host
    # free capacity: one host on another InfiniBand fabric, one on the cluster's (under other leaves)
    elsewhere = fleet.ib_fabric("ib-elsewhere")
    su, leaves = fleet.su_with_leaves("su-else", rails=2, fabric=elsewhere)
    far = gpu_host(gpus=8, su=su)
    fleet.cable(far, leaves, fabric=elsewhere)
    near = _other_su_host(s)
    before_net = _network_view(lost.pk)

    body = _xid79(failed)
    (rem_id,) = body["applied"]["remediations"]
    rem = Remediation.objects.get(pk=rem_id)
    assert (rem.status, rem.consent_mode, rem.reason) == ("notice", "auto", "")  # no longer held
    (notice,) = Notification.objects.filter(event="remediation.notice")
    assert notice.payload["data"]["cluster"] == {"id": str(cluster.pk), "name": "gang", "other_members": ["gang-1"]}
    hosts = [*s.hosts, far, near]
    with time_machine.travel(FAULT + dt.timedelta(seconds=600), tick=False):
        assert remediations_advance()["started"] == 1, Remediation.objects.get(pk=rem_id).reason
        rem.refresh_from_db()
        op = _finish(rem.operation_id, hosts)
        assert op.status == "succeeded", (op.error_code, op.error_detail)
        assert remediations_advance()["finished"] == 1
    rem.refresh_from_db()
    lost.refresh_from_db()
    peer.refresh_from_db()
    # on the cluster's fabric (not the roomier other fabric), same member, same network identity
    assert (rem.status, rem.to_host_id, lost.status, lost.host_id) == ("succeeded", near.pk, "active", near.pk)
    assert (lost.name, lost.cluster_id) == ("gang-0", cluster.pk)
    assert _network_view(lost.pk) == before_net
    guids = {p.port_guid for p in HcaPort.objects.filter(host=near)}
    assert set(IbPartitionMember.objects.filter(instance_id=lost.pk).values_list("guid", flat=True)) == guids
    # claimed as a member of the gang; the old allocation ended; the other member was not touched
    live = Allocation.objects.filter(consumer_id=lost.pk, period__upper_inf=True)
    assert {a.host_id for a in live} == {near.pk}
    consumer = Consumer.objects.get(id=lost.pk)
    assert (consumer.consumer_type, consumer.group) == ("cluster_member", str(cluster.pk))
    assert (peer.status, peer.host_id) == ("active", peer_host.pk)
    assert Operation.objects.filter(target_id=peer.pk, kind="instance.recreate").count() == 0
    assert Instance.objects.filter(cluster=cluster).count() == 2


def test_no_host_within_the_clusters_topology_the_member_waits_and_says_why(world, setup):  # noqa: F811
    s = setup
    _policy(world, "auto", notice=60)
    cluster = _cluster(world, s, topology={"max_leaves_per_rail": 1})
    lost = cluster.members.get(name="gang-0")
    failed = lost.host
    near = _other_su_host(s)  # on the fabric, but under other leaves: two leaves per rail with the other member

    (rem_id,) = _xid79(failed)["applied"]["remediations"]
    with time_machine.travel(FAULT + dt.timedelta(minutes=5), tick=False):
        assert remediations_advance() == {"started": 0, "finished": 0}
    rem = Remediation.objects.get(pk=rem_id)
    assert rem.status == "notice" and rem.reason.startswith("waiting for capacity: ")
    assert "more than 1 leaves on a rail with the gang" in rem.reason
    maintenance = world.client_a.get(f"/api/v1/instances/{lost.pk}/").json()["maintenance"]
    assert maintenance["remediation"] == rem_id and maintenance["reason"] == rem.reason
    lost.refresh_from_db()
    assert (lost.status, lost.host_id) == ("active", failed.pk)  # where it runs, untouched
    assert not Allocation.objects.filter(consumer_id=lost.pk, host=near).exists()

    # a host under the cluster's own leaves becomes free: the next beat moves the member there
    fabric = HcaPort.objects.filter(host=failed).first().fabric
    leaves = {p.rail: p.leaf_switch for p in HcaPort.objects.filter(host=failed)}
    same = gpu_host(gpus=8, su=failed.scalable_unit)
    fleet.cable(same, leaves, fabric=fabric)
    topology_cache_clear()
    hosts = [*s.hosts, near, same]
    with time_machine.travel(FAULT + dt.timedelta(minutes=6), tick=False):
        assert remediations_advance()["started"] == 1
        rem.refresh_from_db()
        assert _finish(rem.operation_id, hosts).status == "succeeded"
        remediations_advance()
    rem.refresh_from_db()
    lost.refresh_from_db()
    assert (rem.status, lost.host_id) == ("succeeded", same.pk)
