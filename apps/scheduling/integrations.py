"""What scheduling plugs into other apps, registered once from `SchedulingConfig.ready`: tenancy's quota
counters ``gpus``, ``mig_slices``, ``vgpus`` counted from the allocation ledger (`selectors.quota_usage`)."""
from __future__ import annotations

from functools import partial

from apps.tenancy.quotas import register_usage_counter

from . import selectors


def register() -> None:
    for resource in ("gpus", "mig_slices", "vgpus"):
        register_usage_counter(resource, partial(selectors.quota_usage, resource))
