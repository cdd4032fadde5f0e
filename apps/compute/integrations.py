"""What compute plugs into other apps, registered once from `ComputeConfig.ready`:

* the operations step runner: the instance and cluster workflows (`workflows`);
* tenancy's quota counters ``instances``, ``vcpus``, ``memory_mib`` (`selectors.quota_usage`) and ``gpus``,
  ``mig_slices``, ``vgpus`` (`selectors.gpu_quota_usage`: the allocation ledger plus unplaced instances);
* billing's usage source and placement resolver ``compute.instance`` (`billing`);
* scheduling's host filter ``ib_partition`` (`services.networks.ib_partition_host_filter`): hosts that can give
  an instance a GUID in the InfiniBand partition it joins.

An app listed in INSTALLED_APPS is required: a broken import here fails start-up instead of silently dropping a
counter or a usage source.
"""
from __future__ import annotations

from functools import partial

from apps.billing.registry import register_placement_resolver, register_usage_source
from apps.scheduling.placement import register_host_filter
from apps.tenancy.quotas import register_usage_counter

from . import billing, selectors
from .services import clusters, networks


def register() -> None:
    from . import workflows  # noqa: F401  (its module body registers the instance workflows)

    for resource in ("instances", "vcpus", "memory_mib"):
        register_usage_counter(resource, partial(selectors.quota_usage, resource))
    for resource in ("gpus", "mig_slices", "vgpus"):
        register_usage_counter(resource, partial(selectors.gpu_quota_usage, resource))
    register_usage_source(billing.SOURCE, billing.instance_usage)
    register_placement_resolver(billing.SOURCE, billing.instance_placements)
    register_host_filter(networks.IB_PARTITION_FILTER, networks.ib_partition_host_filter)
    register_host_filter(clusters.CLUSTER_TOPOLOGY_FILTER, clusters.cluster_member_host_filter)
    from apps.inventory.services.holders import register_vf_holders

    from .services.devices import vfs_held

    register_vf_holders(vfs_held)
