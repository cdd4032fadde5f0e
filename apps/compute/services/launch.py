"""Launch checks: "could this be placed now, if not why and when, and what would it cost" for the body of an
instance or cluster create, without writing anything (docs/adr/0405-launch-checks.md).

`instance_check` and `cluster_check` run the create's own steps - `_instance_prepare` / `_cluster_prepare` (403
and 400 raised exactly as the create raises them) and `instance_admit` / `cluster_admit` (quota, name, the
placement rule of docs/adr/0404-placement-admission.md) - inside a transaction that is always rolled back
(`apps.core.db.rolled_back`). A refusal the create would answer with 409 or 422 is reported in the body instead
(`apps.scheduling.services.check_answer`), so a check and the create it describes cannot disagree.

Body: see `check_answer`; ``quota`` from `apps.tenancy.quotas.quota_report` for every quota key the create
checks; ``price`` from `apps.compute.billing.flavor_price` (on-demand, per hour, × members for a cluster).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from apps.core.db import rolled_back
from apps.core.errors import DomainError, ValidationFailed
from apps.scheduling.errors import CapacityUnavailable
from apps.scheduling.placement.request import TopologyConstraint
from apps.scheduling.services import Unplaceable, check_answer, check_refusal, earliest_fit
from apps.tenancy.quotas import quota_checks_recorded, quota_report

from ..billing import flavor_price
from ..models import Flavor
from .clusters import MEMBER, _cluster_prepare, cluster_admit
from .instances import _instance_prepare, instance_admit, quota_keys, volume_pins
from .placement import CONSUMER_TYPE, instance_queue_position, placement_admit_for, placement_request_for
from .volumes import instance_volumes_check


def _check(*, project, flavor: Flavor, hosts: int, queue: bool, decide: Callable, cluster: bool,
           sla_tier: str | None = None, network: dict | None = None) -> dict:
    from apps.billing.selectors import sla_tier_resolve

    tier = sla_tier_resolve(organization=project.organization, code=sla_tier)
    topology = TopologyConstraint(one_fabric=True) if cluster else None
    refusal = admission = placement_refusal = None
    with quota_checks_recorded(), rolled_back():   # the create's decision; its locks end here
        try:
            admission = decide()
        except DomainError as exc:
            if not check_refusal(exc):
                raise
            refusal = exc
        # the create's quota lines (those it reached are recorded, the rest are counted here)
        quota = [line for key, amount in quota_keys(flavor, hosts)
                 for line in quota_report(scope=project, resource=key, requested=amount)]
    # the rest only reads
    if refusal is not None and not isinstance(refusal, Unplaceable | CapacityUnavailable):
        # refused before the placement rule (quota, name): its answer still says whether and when it fits
        try:
            admission = placement_admit_for(flavor, project.pk, hosts=hosts, topology=topology, queue=queue,
                                            network=network)
        except (Unplaceable, CapacityUnavailable) as exc:
            placement_refusal = exc
    not_now = isinstance(refusal or placement_refusal, CapacityUnavailable) or bool(admission and admission.queued)
    earliest = None
    if admission is not None and admission.queued:
        earliest = earliest_fit(placement_request_for(
            flavor, project.pk, hosts=hosts, topology=topology,
            consumer_type=MEMBER if cluster and hosts > 1 else CONSUMER_TYPE, network=network))
    position = instance_queue_position(project=project, flavor=flavor) if not_now and not cluster else None
    price = flavor_price(flavor, project.organization, count=hosts, sla_tier=tier)
    return check_answer(refusal=refusal, admission=admission, placement_refusal=placement_refusal,
                        earliest_start=earliest, queue_position=position, quota=quota, price=price)


def instance_check(*, actor, project, name: str, flavor_id, image_id, ssh_key_ids: Sequence = (),
                   user_data: str = "", subnet_id=None, security_group_ids: Sequence = (), ib_partition_id=None,
                   queue: bool = False, sla_tier: str | None = None, volumes: Sequence[dict] = ()) -> dict:
    """What `instance_create` would answer for these arguments, as a `check_answer` body; raises its 403 and
    400 errors as it does (400 `unknown_sla_tier`). Writes nothing; ``price`` at `sla_tier` (default the
    organization's default tier). `volumes` are checked as the create checks them (their quota, 409s and the
    host / zone they pin the placement to). An empty `name` and a None `image_id` are not checked (a flavor's
    check before the rest is chosen): the answer is then the flavor's placement, quota and price."""
    flavor, image, _keys, network = _instance_prepare(
        actor=actor, project=project, name=name, flavor_id=flavor_id, image_id=image_id, ssh_key_ids=ssh_key_ids,
        user_data=user_data, subnet_id=subnet_id, security_group_ids=security_group_ids,
        ib_partition_id=ib_partition_id, partial=True)
    if volumes and image is None:  # a volume may be made from the image: it has to be named
        raise ValidationFailed("Volumes need the image.", errors={"image": ["required with volumes"]})

    def instance():
        plan = instance_volumes_check(actor=actor, project=project, image=image, flavor=flavor, requests=volumes,
                                      name=name)
        return instance_admit(project=project, flavor=flavor, name=name, queue=queue, pins=volume_pins(plan),
                              network=network)

    return _check(project=project, flavor=flavor, hosts=1, queue=queue, decide=instance, cluster=False,
                  sla_tier=sla_tier, network=network)


def cluster_check(*, actor, project, name: str, flavor_id, image_id, size: int, ssh_key_ids: Sequence = (),
                  user_data: str = "", subnet_id=None, security_group_ids: Sequence = (), ib_partition_id=None,
                  queue: bool = False, sla_tier: str | None = None, topology: dict | None = None) -> dict:
    """What `cluster_create` would answer (the whole gang, one fabric, under the stated `topology`), as a `check_answer` body; raises its 403
    and 400 errors as it does. Writes nothing. ``queue.position`` is null: a cluster waits in its own operation,
    not in the on-demand queue (docs/adr/0404-placement-admission.md)."""
    flavor, _image, _keys, network = _cluster_prepare(
        actor=actor, project=project, name=name, flavor_id=flavor_id, image_id=image_id, size=size,
        ssh_key_ids=ssh_key_ids, subnet_id=subnet_id, security_group_ids=security_group_ids,
        ib_partition_id=ib_partition_id)

    def gang():
        return cluster_admit(project=project, flavor=flavor, name=name, size=size, queue=queue, network=network,
                             topology=topology)

    return _check(project=project, flavor=flavor, hosts=size, queue=queue, decide=gang, cluster=True,
                  sla_tier=sla_tier, network=network)
