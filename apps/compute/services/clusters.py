"""Clusters: N instances of one flavor, placed all-or-nothing under the placement engine's network-topology
rules (one InfiniBand fabric; fewest leaf switches per rail), and deleted together.

`cluster_create` writes the cluster and its N pending instances and starts one `cluster.create` operation that
claims every member's capacity in one ledger transaction (gang claim); it then starts each member's create (the
flavor kind's: `instance.create` for VMs, the bare-metal deploy for a `baremetal` flavor, whose members are whole
hosts), whose placement step finds the host already chosen.

The placement rule (docs/adr/0404-placement-admission.md) runs before anything is written: a gang no topology of
the fleet could ever hold is 422 `unplaceable`; one that cannot be held now is 409 `capacity_unavailable` with
``earliest_start``, unless `queue`: then the cluster waits, all-or-nothing, as one entry of the on-demand queue
(`cluster_queue`; without a queue hook, in its create operation). A gang claim
that loses a race with another create asks the rule again: it places again when the gang still fits elsewhere,
fails at once with 409 `capacity_unavailable` and ``earliest_start`` when it does not fit now (never `error`,
never a wait until the create deadline), or, when the client asked `queue: true`, waits as a queued cluster.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

from django.db import transaction

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.db import atomic_with_retry, unique_conflict
from apps.core.errors import Conflict, ValidationFailed
from apps.core.transitions import transition
from apps.operations import workflows as wf
from apps.operations.runner import operation_deadline_set, operation_start
from apps.operations.workflows import StepWait
from apps.scheduling.errors import CapacityUnavailable
from apps.scheduling.ledger import ConsumerRef
from apps.scheduling.placement import HostFilterResult, HostNeed, PlacementRequest, host_topology, set_refusal
from apps.scheduling.placement.request import TopologyConstraint
from apps.scheduling.services import Unplaceable
from apps.scheduling.services.placement import placement_claim
from apps.tenancy.authz import authorize_project
from apps.tenancy.quotas import quota_check, quota_check_all

from .. import conf
from ..errors import Code
from ..models import Cluster, Instance
from ..states import CLUSTER_TRANSITIONS, ClusterStatus, InstanceStatus
from ._common import validate_name
from .instances import (
    CREATE,
    TARGET,
    WRITERS,
    _resolve,
    gpu_quota_keys,
    instance_delete,
    operation_kind,
    quota_keys,
)
from .networks import network_request_resolve
from .placement import cluster_queue, cluster_queue_wait, placement_admit_for, placement_request_for

CLUSTER_CREATE = "cluster.create"
MEMBER = "cluster_member"
#: the placement engine's host filter of a member's re-place (`cluster_member_host_filter`)
CLUSTER_TOPOLOGY_FILTER = "cluster_topology"
MAX_MEMBER_NAME = 63


def _cluster_prepare(*, actor, project, name: str, flavor_id, image_id, size: int, ssh_key_ids: Sequence,
                     subnet_id, security_group_ids: Sequence, ib_partition_id):
    """The create's checks of the request itself (403, 400). Returns (flavor, image, keys, network)."""
    authorize_project(actor, project, WRITERS)
    validate_name(name)
    validate_name(f"{name}-{size - 1}", field="name")
    if size < 1:
        raise ValidationFailed("size must be at least 1.", errors={"size": ["at least 1"]})
    flavor, image, keys = _resolve(project, flavor_id, image_id, ssh_key_ids)
    operation_kind(flavor, CREATE)  # members run their flavor kind's create (409 `not_supported_for_flavor_kind`)
    network = network_request_resolve(project=project, subnet_id=subnet_id, security_group_ids=security_group_ids,
                                      ib_partition_id=ib_partition_id)
    return flavor, image, keys, network


def cluster_topology(topology: dict | None) -> TopologyConstraint:
    """The engine's constraint for a cluster's stated `topology` ({max_leaves_per_rail, max_spine_groups,
    max_nvlink_domains}; the members are always on one fabric)."""
    t = topology or {}
    return TopologyConstraint(one_fabric=True, max_leaves_per_rail=t.get("max_leaves_per_rail"),
                              max_spine_groups=t.get("max_spine_groups"),
                              max_nvlink_domains=t.get("max_nvlink_domains"))


def _admit_stated(flavor, project, *, size: int, topology: dict | None, **kw):
    """The placement rule for the gang; a topology constraint the tenant stated that no set of hosts of the
    fleet could ever meet (422 `unplaceable`, reason `topology` or the constraint's name, while the same gang without it could be placed)
    is the request's fault: 400 `topology_constraint_impossible` with the engine's reason."""
    try:
        return placement_admit_for(flavor, project.pk, hosts=size, topology=cluster_topology(topology), **kw)
    except Unplaceable as exc:
        if not (topology and exc.reason in ("topology", *topology)):  # the engine names the constraint
            raise
        try:
            placement_admit_for(flavor, project.pk, hosts=size, topology=cluster_topology(None), **kw)
        except (Unplaceable, CapacityUnavailable):
            raise exc from None
        notes = [f.get("note") for f in (exc.explanation or {}).get("filters", []) if f.get("filter") == "topology"]
        raise ValidationFailed(
            "No set of hosts in the fleet can meet the cluster's topology constraint.",
            code="topology_constraint_impossible",
            errors={"topology": [n for n in notes if n] or [exc.detail]}) from None


def cluster_admit(*, project, flavor, name: str, size: int, queue: bool = False, network: dict | None = None,
                  topology: dict | None = None):
    """The create's decisions on quota (422), name (409 `name_taken`, also a member's name) and placement (the whole
    gang on one fabric, on hosts that can join the members' InfiniBand partition in `network`: 422 `unplaceable`,
    409 `capacity_unavailable`), in the create's order and transaction. Returns the `Admission`. Writes nothing;
    `cluster_create` and `cluster_check` both call it."""
    quota_check_all(scope=project, requests=quota_keys(flavor, size), window=(now(), None))
    if Cluster.objects.filter(project=project, name=name).exclude(status=ClusterStatus.DELETED).exists():
        raise Conflict(f"A cluster named {name!r} exists in this project.", code=Code.NAME_TAKEN)
    taken = (Instance.objects.filter(project=project, name__in=[f"{name}-{i}" for i in range(size)])
             .exclude(status=InstanceStatus.DELETED).order_by("name").values_list("name", flat=True).first())
    if taken:
        raise Conflict(f"An instance named {taken!r} exists in this project.", code=Code.NAME_TAKEN)
    return _admit_stated(flavor, project, size=size, topology=topology, queue=queue, network=network)


@atomic_with_retry
def cluster_create(*, actor, project, name: str, flavor_id, image_id, size: int, ssh_key_ids: Sequence = (),
                   user_data: str = "", request_id: str = "", subnet_id=None, security_group_ids: Sequence = (),
                   ib_partition_id=None, queue: bool = False, sla_tier: str | None = None,
                   placement_policy: str = "", topology: dict | None = None) -> Cluster:
    """Create a cluster of `size` members named ``<name>-<i>`` (i from 0). 400 when a member name would not be
    a DNS label; otherwise the errors of `instance_create`. Every member gets its own port in `subnet_id` and
    joins `ib_partition_id` (the members share the partition). 422 `unplaceable` / 409 `capacity_unavailable`
    (with ``earliest_start``) by the placement rule (module doc); with `queue` a cluster that cannot be held now
    waits up to `COMPUTE_QUEUE_TIMEOUT_S` for all its members' capacity. The operation claims it all or nothing.
    `sla_tier`: the SLA tier code the cluster and every member are bought at (default: the organization's default
    tier; 400 `unknown_sla_tier`). `placement_policy` (`pack` | `spread`) and `topology` ({max_leaves_per_rail,
    max_spine_groups, max_nvlink_domains}): the tenant's hints, kept on the cluster and given to the engine on every claim of the gang;
    a `topology` no set of the fleet's hosts could meet answers 400 `topology_constraint_impossible`."""
    from apps.billing.selectors import sla_tier_resolve

    flavor, image, keys, network = _cluster_prepare(
        actor=actor, project=project, name=name, flavor_id=flavor_id, image_id=image_id, size=size,
        ssh_key_ids=ssh_key_ids, subnet_id=subnet_id, security_group_ids=security_group_ids,
        ib_partition_id=ib_partition_id)
    tier = sla_tier_resolve(organization=project.organization, code=sla_tier)
    with transaction.atomic():
        admission = cluster_admit(project=project, flavor=flavor, name=name, size=size, queue=queue,
                                  network=network, topology=topology)
        with unique_conflict(f"A cluster named {name!r} exists in this project.", code=Code.NAME_TAKEN):
            cluster = Cluster.objects.create(project=project, name=name, flavor=flavor, image=image, size=size,
                                             sla_tier=tier, placement_policy=placement_policy,
                                             topology=topology or {})
        for i in range(size):
            member_name = f"{name}-{i}"
            with unique_conflict(f"An instance named {member_name!r} exists in this project.", code=Code.NAME_TAKEN):
                inst = Instance.objects.create(project=project, name=member_name, flavor=flavor, image=image,
                                               user_data=user_data, cluster=cluster, network=network,
                                               sla_tier=tier, placement_policy=placement_policy)
            inst.ssh_keys.set(keys)
        op = operation_start(kind=CLUSTER_CREATE, target_type="compute.cluster", target_id=cluster.pk,
                             project=project, actor=actor, request_id=request_id,
                             state={**({"queue": True} if queue else {}),
                                    **({"queued": admission.reason} if admission.queued else {})})
        if admission.queued and not cluster_queue(actor=actor, cluster=cluster, operation=op,
                                                  reason=admission.reason):
            operation_deadline_set(operation=op, deadline_at=now() + dt.timedelta(seconds=conf.queue_timeout_s()))
        audit_record(actor=actor, action="compute.cluster.create", target=cluster,
                     after={"name": name, "flavor": flavor.name, "size": size,
                            **({"network": network} if network else {}),
                            **({"queued": admission.reason} if admission.queued else {})})
    return cluster


def cluster_members_claim(*, actor, cluster: Cluster) -> bool:
    """Claim every member's capacity of `cluster` in one ledger transaction (gang: all or nothing) and record each
    member's host. Returns False when they were already placed. Raises `CapacityUnavailable` (409) when the gang
    does not fit now (nothing claimed), `QuotaExceeded` (422) when the GPU limit was lowered since the create.
    Locks the cluster, then its members (name order); call in a transaction (the step's or the queue's)."""
    cluster = Cluster.objects.select_for_update(of=("self",)).select_related("flavor", "project").get(pk=cluster.pk)
    members = list(cluster.members.select_for_update().order_by("name"))
    if all(m.host_id for m in members):
        return False
    for key, _amount in gpu_quota_keys(cluster.flavor):  # held since the create request: only a lowered limit fails
        quota_check(scope=cluster.project, resource=key, requested=0)
    req = placement_request_for(cluster.flavor, cluster.project_id, hosts=len(members), consumer_type=MEMBER,
                                topology=cluster_topology(cluster.topology), network=members[0].network,
                                policy=cluster.placement_policy)
    with transaction.atomic():
        placed = placement_claim(actor=actor, request=req, consumers=[
            ConsumerRef(id=m.pk, consumer_type=MEMBER, project_id=cluster.project_id, group=str(cluster.pk))
            for m in members])
    for m, choice in zip(members, placed.candidate.hosts, strict=True):
        devices = {**(m.devices or {}), "placement": choice.as_dict()}
        Instance.objects.filter(pk=m.pk).update(host_id=choice.host_id, devices=devices)
    return True


def cluster_member_request(instance: Instance, *, pins: dict | None = None) -> PlacementRequest:
    """The `PlacementRequest` that re-places one member of a cluster (a re-create off a failed GPU or host,
    docs/adr/0217-gang-re-place-of-a-lost-member.md): one host for the member's flavor, its networks (an InfiniBand
    partition needs a GUID on the partition's fabric), the cluster's placement policy, consumer type
    ``cluster_member``, and the need `CLUSTER_TOPOLOGY_FILTER`: only a host that, with the hosts of the other
    members, meets the cluster's topology (one fabric, its ``max_leaves_per_rail`` / ``max_spine_groups`` /
    ``max_nvlink_domains``) and
    holds no other member. `pins`: the instance's volume pins (`services.volumes.instance_placement_pins`)."""
    cluster = instance.cluster
    req = placement_request_for(instance.flavor, instance.project_id, consumer_type=MEMBER, pins=pins,
                                network=instance.network, policy=cluster.placement_policy)
    need = HostNeed(CLUSTER_TOPOLOGY_FILTER, f"{cluster.pk}:{instance.pk}")
    return dataclasses.replace(req, needs=(*req.needs, need))


def cluster_member_host_filter(*, need: HostNeed, request: PlacementRequest, host_ids: list,
                               ideal: bool) -> HostFilterResult:
    """Scheduling's host filter ``cluster_topology`` (`apps.scheduling.placement.register_host_filter`), asked by
    `cluster_member_request` with ``need.key`` = ``"<cluster id>:<member id>"``: remove a host that holds another
    member of the cluster (one member per host, as the gang claim places them) and a host that, with the hosts the
    other members run on, breaks the cluster's topology (`cluster_topology`: one InfiniBand fabric, the tenant's
    limits; `apps.scheduling.placement.set_refusal`). The same answer for the ideal fleet: the cabling and the
    other members do not change short of the hardware or the tenant. Reads only."""
    cluster_id, member_id = need.key.split(":", 1)
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return HostFilterResult({h: "the cluster no longer exists" for h in host_ids})
    peers = list(Instance.objects.filter(cluster_id=cluster.pk, host__isnull=False).exclude(pk=member_id)
                 .exclude(status=InstanceStatus.DELETED).values_list("host_id", flat=True))
    constraint, topo = cluster_topology(cluster.topology), host_topology()
    removed = {}
    for host_id in host_ids:
        if host_id in peers:
            removed[host_id] = "holds another member of the cluster"
        elif why := set_refusal([*peers, host_id], constraint, topo):
            removed[host_id] = why
    return HostFilterResult(removed, note=f"joins {len(peers)} other members of cluster {cluster.name}")


def _claim_members(op):
    cluster = Cluster.objects.select_for_update(of=("self",)).select_related("flavor", "project").get(pk=op.target_id)
    cluster_queue_wait(cluster)  # an entry of the on-demand queue waits there, in queue order (StepWait)
    members = list(cluster.members.order_by("name"))
    try:
        cluster_members_claim(actor=op.actor, cluster=cluster)
    except CapacityUnavailable as exc:  # queued, or a concurrent create won the hosts: not now, never error
        op.state["waiting_for_capacity"] = exc.detail[:500]
        if "queued" not in op.state:  # admitted now and lost the race: the rule again (module doc)
            admission = placement_admit_for(cluster.flavor, cluster.project_id, hosts=len(members),
                                            topology=cluster_topology(cluster.topology),
                                            queue=bool(op.state.get("queue")), network=members[0].network,
                                            policy=cluster.placement_policy)
            if admission.queued:
                op.state["queued"] = admission.reason
                if not cluster_queue(actor=op.actor, cluster=cluster, operation=op, reason=admission.reason):
                    operation_deadline_set(operation=op,
                                           deadline_at=now() + dt.timedelta(seconds=conf.queue_timeout_s()))
                return wf.AGAIN
        raise StepWait(conf.capacity_poll_s(), f"waiting for capacity: {exc.detail[:200]}") from exc
    return None


def _start_members(op) -> None:
    """Start each pending member's `instance.create`. The cluster stays `pending` until every member is
    `active` (`cluster_member_settled`): started is not running."""
    cluster = Cluster.objects.select_for_update().select_related("flavor").get(pk=op.target_id)
    for m in cluster.members.filter(status=InstanceStatus.PENDING):
        operation_start(kind=operation_kind(cluster.flavor, CREATE), target_type=TARGET, target_id=m.pk,
                        project=m.project, actor=op.actor)


def _cluster_failed(op, code: str, detail: str) -> None:
    cluster = Cluster.objects.select_for_update().get(pk=op.target_id)
    if cluster.status != ClusterStatus.PENDING:
        return
    transition(cluster, "fail", CLUSTER_TRANSITIONS, extra={"error_code": code[:64], "error_reason": detail[:1000]})
    from ..states import INSTANCE_TRANSITIONS

    for m in cluster.members.select_for_update().filter(status=InstanceStatus.PENDING):
        transition(m, "fail", INSTANCE_TRANSITIONS, extra={"error_code": code[:64], "error_reason": detail[:1000]})


def cluster_delete(*, actor, cluster: Cluster) -> Cluster:
    """Delete the cluster and every member (each member's delete is idempotent and releases its allocations)."""
    authorize_project(actor, cluster.project, WRITERS)
    with transaction.atomic():
        if cluster.status not in (ClusterStatus.DELETING, ClusterStatus.DELETED):
            transition(cluster, "delete", CLUSTER_TRANSITIONS)
            audit_record(actor=actor, action="compute.cluster.delete", target=cluster, after={"status": cluster.status})
        for m in cluster.members.exclude(status=InstanceStatus.DELETED):
            instance_delete(actor=actor, instance=m)
        cluster_finish_if_empty(cluster)
    return cluster


def cluster_member_settled(cluster: Cluster) -> None:
    """A member's create ended (the instance workflow calls this in its transaction, the cluster locked).

    `pending` → `active` once every member is `active`; `pending` → `error` (with the member's code and reason)
    as soon as one member is in `error`, since the cluster cannot be whole. Any other cluster state is left as
    it is (a member that fails later does not undo an active cluster; a deleting cluster finishes its delete)."""
    if cluster.status != ClusterStatus.PENDING:
        return
    statuses = list(cluster.members.values_list("status", "error_code", "error_reason", "name").order_by("name"))
    failed = next((row for row in statuses if row[0] == InstanceStatus.ERROR), None)
    if failed is not None:
        transition(cluster, "fail", CLUSTER_TRANSITIONS, extra={
            "error_code": (failed[1] or "member_failed")[:64],
            "error_reason": f"member {failed[3]} failed: {failed[2]}"[:1000]})
    elif statuses and all(row[0] == InstanceStatus.ACTIVE for row in statuses):
        transition(cluster, "activate", CLUSTER_TRANSITIONS)


def cluster_finish_if_empty(cluster: Cluster) -> None:
    """`deleting` → `deleted` once every member is deleted (called by the member delete workflow)."""
    if cluster.status == ClusterStatus.DELETING and not cluster.members.exclude(
            status=InstanceStatus.DELETED).exists():
        transition(cluster, "deleted", CLUSTER_TRANSITIONS)


wf.register(wf.Workflow(kind=CLUSTER_CREATE, steps=(("claim_members", _claim_members),
                                                    ("start_members", _start_members)),
                        on_error=_cluster_failed, deadline_seconds=600.0))
