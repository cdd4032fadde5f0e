"""What storage plugs into other apps, registered once from `StorageConfig.ready`:

* the operations step runner: the volume and snapshot workflows (`workflows`);
* tenancy's quota counters ``volumes``, ``volume_gib`` and ``snapshots`` (qualified by volume type name; `selectors.quota_usage`)
  and the qualifiers ``volume_gib`` accepts (the volume types' names);
* compute's disk provider (`services.attachments.instance_volume_disks`: an instance's domain definition carries
  its attached volumes) and delete hook (`services.reconcile.instance_attachments_release`: the instance's
  delete workflow releases its attachments and deletes its `delete_on_termination` volumes) and create hooks
  (`services.instance_volumes`: the volumes an instance create asks for);
* billing's usage source ``storage.volume`` (`selectors.volume_usage`: GiB held per volume type, SKU
  ``volume:type=<name>``).
"""
from __future__ import annotations

from functools import partial

from apps.billing.registry import register_usage_source
from apps.compute.services.volumes import (
    CreateVolumeHooks,
    register_create_hooks,
    register_delete_hook,
    register_disk_provider,
)
from apps.tenancy.quotas import register_quota_qualifiers, register_usage_counter

from . import selectors
from .services import instance_volumes as launch
from .services.attachments import instance_volume_disks
from .services.reconcile import instance_attachments_release


def register() -> None:
    from . import workflows  # noqa: F401  (its module body registers the storage workflows)

    for resource in ("volumes", "volume_gib", "snapshots"):
        register_usage_counter(resource, partial(selectors.quota_usage, resource))
    register_quota_qualifiers("volume_gib", selectors.volume_type_names)
    register_usage_source("storage.volume", selectors.volume_usage)
    register_disk_provider(instance_volume_disks)
    register_delete_hook(instance_attachments_release)
    register_create_hooks(CreateVolumeHooks(check=launch.volumes_check, reserve=launch.volumes_reserve,
                                            prepare=launch.volumes_prepare, abandon=launch.volumes_abandon,
                                            pins=launch.placement_pins))
