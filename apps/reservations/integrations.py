"""What reservations plugs into other apps, registered once from `ReservationsConfig.ready`:

* compute's placement hook (`hooks.placement_hook`): lease, spot and queued instances;
* compute's queue hook (`services.queue.queue_join`): a create with `queue: true` joins the on-demand queue;
* compute's cluster queue hooks (`services.queue.cluster_queue_join`, `hooks.cluster_queue_wait`): a cluster
  create with `queue: true` is one all-or-nothing entry of the same queue;
* compute's queue-position hook (`services.queue.queue_position_for`): the place a launch check reports;
* tenancy's quota counter ``leases`` (`hooks.lease_quota_usage`);
* billing's usage source ``reservations.lease`` (`selectors.lease_usage`) and placement resolver of the same
  name (`selectors.lease_placements`: provider-fault downtime of a leased host or GPU);
* the Prometheus collector of the on-demand queue (`metrics.QueueCollector`) in core's registry.
"""
from __future__ import annotations

from apps.billing.registry import register_placement_resolver, register_usage_source
from apps.compute.services.placement import (
    register_cluster_queue_hook,
    register_placement_hook,
    register_queue_hook,
    register_queue_position_hook,
)
from apps.core.metrics import register_collector
from apps.tenancy.quotas import register_usage_counter

from . import hooks, metrics, selectors
from .services.queue import cluster_queue_join, queue_join, queue_position_for


def register() -> None:
    register_placement_hook(hooks.placement_hook)
    register_queue_hook(queue_join)
    register_cluster_queue_hook(join=cluster_queue_join, wait=hooks.cluster_queue_wait)
    register_queue_position_hook(queue_position_for)
    register_usage_counter("leases", hooks.lease_quota_usage)
    register_usage_source("reservations.lease", selectors.lease_usage)
    register_placement_resolver("reservations.lease", selectors.lease_placements)
    register_collector(metrics.COLLECTOR)
