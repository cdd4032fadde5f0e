"""What scheduling plugs into other apps, registered once from `SchedulingConfig.ready`: the Prometheus collector of
the fleet's GPUs by model and state (`metrics.GpuCollector`) in core's registry.

The allocation ledger's count of the GPU quotas (``gpus``, ``mig_slices``, ``vgpus``: `selectors.quota_usage`)
is registered by compute (`apps.compute.integrations`), which adds what instances not placed yet hold, so the
one registered counter is the whole usage."""
from __future__ import annotations

from apps.core.metrics import register_collector

from . import metrics


def register() -> None:
    register_collector(metrics.COLLECTOR)
