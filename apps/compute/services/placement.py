"""The integration point with the allocation ledger (apps.scheduling): place and claim an instance's capacity,
and release it. Compute never writes allocations itself."""
from __future__ import annotations

import datetime as dt

from django.db import transaction

from apps.core.clock import now
from apps.inventory.states import ProvisioningKind as HostProvisioningKind
from apps.operations.runner import operation_deadline_set
from apps.scheduling.errors import CapacityUnavailable
from apps.scheduling.ledger import ConsumerRef, allocations_release
from apps.scheduling.placement import PlacementRequest
from apps.scheduling.services.placement import placement_claim
from apps.tenancy.quotas import quota_check

from .. import conf
from ..models import Flavor, Instance
from ..states import GpuForm, ProvisioningKind

CONSUMER_TYPE = "instance"


class CapacityTaken(CapacityUnavailable):
    """On-demand capacity an admitted create counted on is gone (a concurrent claim won it): "not now", so the
    create waits and places again instead of failing (docs/adr/0404-placement-admission.md)."""

#: Hooks of other apps (apps.reservations): ``fn(instance, request) -> PlacementRequest`` adjusts an instance's
#: request (draw from a lease, spot); it may raise `StepWait` (a queued request keeps waiting) or a DomainError.
_PLACEMENT_HOOKS: list = []


def register_placement_hook(fn) -> None:
    if fn not in _PLACEMENT_HOOKS:
        _PLACEMENT_HOOKS.append(fn)


#: Hooks of other apps (apps.reservations): ``fn(*, actor, instance, operation, reason) -> bool`` puts an
#: instance whose create asked to wait (`queue: true`) into the on-demand queue, in the create's transaction;
#: True when it did. Without one, the create operation waits at its placement step (`placement_wait`).
_QUEUE_HOOKS: list = []


def register_queue_hook(fn) -> None:
    if fn not in _QUEUE_HOOKS:
        _QUEUE_HOOKS.append(fn)


#: Hooks of other apps (apps.reservations): ``fn(*, project, flavor) -> int | None``: the 1-based place a new
#: request of `flavor` in `project` would take in the on-demand queue now (launch checks).
_QUEUE_POSITION_HOOKS: list = []


def register_queue_position_hook(fn) -> None:
    if fn not in _QUEUE_POSITION_HOOKS:
        _QUEUE_POSITION_HOOKS.append(fn)


def instance_queue_position(*, project, flavor: Flavor) -> int | None:
    """The place a new waiting request would take in the on-demand queue (see `register_queue_position_hook`);
    None without a queue."""
    for fn in _QUEUE_POSITION_HOOKS:
        position = fn(project=project, flavor=flavor)
        if position is not None:
            return position
    return None


#: Hooks of other apps (apps.reservations) for clusters that wait for capacity (`queue: true`): ``join(*, actor,
#: cluster, operation, reason) -> bool`` makes the cluster one entry of the on-demand queue (all-or-nothing: the
#: queue places the whole gang, in queue order); ``wait(cluster)`` raises `StepWait` while its entry waits and
#: a DomainError once it expired.
_CLUSTER_QUEUE_HOOKS: list = []


def register_cluster_queue_hook(*, join, wait) -> None:
    if (join, wait) not in _CLUSTER_QUEUE_HOOKS:
        _CLUSTER_QUEUE_HOOKS.append((join, wait))


def cluster_queue(*, actor, cluster, operation, reason: str) -> bool:
    """Put `cluster` in the on-demand queue (see `register_cluster_queue_hook`). True when a hook took it."""
    return any(join(actor=actor, cluster=cluster, operation=operation, reason=reason)
               for join, _wait in _CLUSTER_QUEUE_HOOKS)


def cluster_queue_wait(cluster) -> None:
    """Raise `StepWait` while the cluster's queue entry waits (the queue, not the cluster's own operation, places
    it), a DomainError once it expired; return when it has no waiting entry."""
    for _join, wait in _CLUSTER_QUEUE_HOOKS:
        wait(cluster)


def instance_queue(*, actor, instance: Instance, operation, reason: str) -> bool:
    """Put `instance` in the on-demand queue (see `register_queue_hook`). Returns True when a hook took it."""
    return any(fn(actor=actor, instance=instance, operation=operation, reason=reason) for fn in _QUEUE_HOOKS)


def instance_readmit(*, actor, instance: Instance, operation, queue: bool) -> bool:
    """A create whose claim lost the capacity it was admitted on to a concurrent one (`CapacityTaken`) asks the
    placement rule again instead of waiting until its deadline (docs/adr/0404-placement-admission.md):

    - it fits now elsewhere: returns False (place again);
    - never: raises 422 `unplaceable`; not now: raises 409 `capacity_unavailable` with ``earliest_start``, so the
      create fails at once with that code (the operation's ``error_extra`` carries ``earliest_start``);
    - not now and the client asked to wait (`queue`): the instance joins the on-demand queue like a create that
      was queued at once (`instance_queue`; without a queue hook its operation waits until the queue timeout) and
      this returns True. Writes only the queue entry; call in the placement step's transaction."""
    from .volumes import instance_placement_pins

    admission = placement_admit_for(instance.flavor, instance.project_id, queue=queue,
                                    pins=instance_placement_pins(instance), network=instance.network,
                                    policy=instance.placement_policy)
    if not admission.queued:
        return False
    if not instance_queue(actor=actor, instance=instance, operation=operation, reason=admission.reason):
        operation_deadline_set(operation=operation, deadline_at=now() + dt.timedelta(seconds=conf.queue_timeout_s()))
    return True


#: the tenant's placement hint (`Instance.placement_policy`, `Cluster.placement_policy`) -> the engine's weigher
TENANT_POLICIES = {"pack": "binpack", "spread": "spread"}


def placement_admit_for(flavor: Flavor, project_id, *, hosts: int = 1, topology=None, queue: bool = False,
                        pins: dict | None = None, network: dict | None = None, policy: str = ""):
    """The placement rule (`apps.scheduling.services.placement_admit`) for `hosts` instances of `flavor`:
    raises 422 `unplaceable` / 409 `capacity_unavailable` (with ``earliest_start``) or returns the Admission
    (``queued`` when `queue` and the fleet cannot hold it now). `pins`: ``host_id`` / ``zone`` the instance is
    bound to (its volumes: `services.volumes.instance_placement_pins`); `network`: the networks it joins
    (`Instance.network`; an InfiniBand partition limits it to hosts that can give it a GUID there)."""
    from apps.scheduling.services import placement_admit

    req = placement_request_for(flavor, project_id, hosts=hosts, topology=topology,
                                consumer_type=CONSUMER_TYPE if hosts == 1 else "cluster_member", pins=pins,
                                network=network, policy=policy)
    return placement_admit(request=req, queue=queue)


def placement_request_for(flavor: Flavor, project_id, *, hosts: int = 1, consumer_type: str = CONSUMER_TYPE,
                          topology=None, pins: dict | None = None, network: dict | None = None,
                          policy: str = "") -> PlacementRequest:
    """The `PlacementRequest` of `hosts` instances of `flavor`: on hypervisors, or, for a bare-metal flavor, on
    bare-metal hosts, all of the flavor's GPUs on one host and the host dedicated to the project (nobody else's
    allocation beside it). `pins` (``host_id``, ``zone``): where the instance's volumes bind it to. `network`
    (`Instance.network`): its needs (`services.networks.placement_needs`: joining an InfiniBand partition
    needs a host that can give it a GUID on the partition's fabric). `policy`: the tenant's hint (`pack` |
    `spread`, `TENANT_POLICIES`), passed to the engine's weigher; '' leaves it to the zone or the default."""
    from .networks import placement_needs

    baremetal = flavor.kind == ProvisioningKind.BAREMETAL
    kw = {**{k: v for k, v in (pins or {}).items() if k in ("host_id", "zone") and v},
          "project_id": project_id, "vcpus": flavor.vcpus, "memory_mib": flavor.memory_mib, "hosts": hosts,
          "provisioning_kind": HostProvisioningKind.BAREMETAL if baremetal else HostProvisioningKind.HYPERVISOR,
          "consumer_type": consumer_type, "dedicated": baremetal,
          "gpu_models": (flavor.gpu_model,) if flavor.gpu_model else (), "needs": placement_needs(network)}
    if flavor.gpu_form == GpuForm.GPU:
        kw["gpus_per_host"] = flavor.gpu_count
    elif flavor.gpu_form == GpuForm.MIG:
        kw["mig_profile"] = flavor.mig_profile
    elif flavor.gpu_form == GpuForm.VGPU:
        kw["vgpu_type"] = flavor.vgpu_type
    elif flavor.gpu_form == GpuForm.SHARE:
        kw["share_milli"] = flavor.share_milli
    if topology is not None:
        kw["topology"] = topology
    if policy:
        kw["policy"] = TENANT_POLICIES[policy]
    return PlacementRequest(**kw)


def instance_placement_request(instance: Instance, flavor: Flavor | None = None) -> PlacementRequest:
    """The `PlacementRequest` of `instance` at `flavor` (default its own), adjusted by the placement hooks of
    other apps: inside a lease (``lease_id``, ``end`` = the lease's end), spot (``spot``). Raises what a hook
    raises (a `DomainError` such as 409 `lease_not_usable`; `StepWait` while a queued request or a spot give-back
    keeps the instance waiting)."""
    from .volumes import instance_placement_pins

    request = placement_request_for(flavor or instance.flavor, instance.project_id,
                                    pins=instance_placement_pins(instance), network=instance.network,
                                    policy=instance.placement_policy)
    for hook in _PLACEMENT_HOOKS:
        request = hook(instance, request)
    return request


def instance_replacement_request(instance: Instance) -> PlacementRequest:
    """The request a re-create (`instance.recreate`) places the instance with: a cluster member's joins the other
    members' topology (`clusters.cluster_member_request`: one fabric, the cluster's limits, one member per host);
    any other instance's is `instance_placement_request`."""
    if instance.cluster_id is None:
        return instance_placement_request(instance)
    from .clusters import cluster_member_request
    from .volumes import instance_placement_pins

    return cluster_member_request(instance, pins=instance_placement_pins(instance))


def _claim(*, actor, instance: Instance, request: PlacementRequest | None = None):
    """Place and claim for the instance (consumer id = instance id) after the GPU quota re-check; returns the
    `Placed`. `request`: default `instance_placement_request`. Raises as `instance_place_and_claim` says (a cluster
    member's claim: `CapacityUnavailable`, never `CapacityTaken`: it is not re-admitted as a lone instance)."""
    from .instances import gpu_quota_keys

    request = request or instance_placement_request(instance)
    if request.lease_id is None:  # inside a lease the GPUs are the lease's (already counted)
        # the create request already holds this instance's GPUs (it counts as unplaced until the claim
        # below; a re-created one holds them on its old host), so the re-check adds nothing: it only fails if
        # the limit was lowered in between
        for key, _amount in gpu_quota_keys(instance.flavor):
            quota_check(scope=instance.project, resource=key, requested=0)
    member = request.consumer_type != CONSUMER_TYPE and instance.cluster_id is not None
    try:
        return placement_claim(actor=actor, request=request,
                               consumers=ConsumerRef(id=instance.pk, consumer_type=request.consumer_type,
                                                     project_id=instance.project_id,
                                                     group=str(instance.cluster_id) if member else ""))
    except CapacityUnavailable as exc:
        if request.lease_id is None and not request.spot and not member:
            raise CapacityTaken(exc.detail, explanation=exc.explanation) from exc
        raise


def instance_place_and_claim(*, actor, instance: Instance, operation) -> None:
    """Re-check the GPU quotas (held since the create request), then place and claim for the instance (consumer id = instance
    id) in this transaction, and record the host and the placement's choice on the instance.
    Raises `CapacityTaken` (409, on-demand: the create step waits and places again), `CapacityUnavailable`
    (409, inside a lease or spot) or `QuotaExceeded` (422): the last two are terminal for the create."""
    with transaction.atomic():
        placed = _claim(actor=actor, instance=instance)
        choice = placed.candidate.hosts[0]
        instance.host_id = choice.host_id
        instance.devices = {**(instance.devices or {}), "placement": choice.as_dict()}
        Instance.objects.filter(pk=instance.pk).update(host_id=choice.host_id, devices=instance.devices)
        operation.state["host_id"] = str(choice.host_id)


def instance_claim_replacement(*, actor, instance: Instance, operation) -> None:
    """A re-create's first step: claim the new capacity while the instance still holds its old allocation and
    host (both stay recorded on the instance until `instance_replacement_adopt`), so a claim that fails leaves
    the VM where it runs. Records ``new_host_id``, ``new_placement`` and ``new_allocations`` (ids) in the
    operation's state. A cluster member is placed where it joins the other members' topology
    (`instance_replacement_request`). Raises as `instance_place_and_claim`."""
    with transaction.atomic():
        placed = _claim(actor=actor, instance=instance, request=instance_replacement_request(instance))
        choice = placed.candidate.hosts[0]
        operation.state["new_host_id"] = str(choice.host_id)
        operation.state["new_placement"] = choice.as_dict()
        operation.state["new_allocations"] = [str(a.pk) for a in placed.allocations]


def instance_replacement_adopt(*, instance: Instance, operation) -> None:
    """End every allocation of the instance but the re-create's new claim, and record the new host and
    placement on the instance (the old host's domain, devices and partition memberships are the caller's to
    remove first)."""
    allocations_release(consumer_id=instance.pk, keep=operation.state.get("new_allocations") or ())
    instance.host_id = operation.state["new_host_id"]
    instance.devices = {"placement": operation.state["new_placement"]}
    Instance.objects.filter(pk=instance.pk).update(host_id=instance.host_id, devices=instance.devices)
    operation.state["host_id"] = operation.state["new_host_id"]


def instance_replacement_release(*, instance: Instance, operation) -> int:
    """Undo a re-create's claim that was not adopted: end the allocations of ``new_allocations`` only."""
    ids = operation.state.get("new_allocations") or ()
    return allocations_release(consumer_id=instance.pk, only=list(ids)) if ids else 0


def instance_allocations_release(*, instance: Instance) -> int:
    """End every allocation the instance holds (idempotent). Returns the rows changed."""
    return allocations_release(consumer_id=instance.pk)
