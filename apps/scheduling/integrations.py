"""What scheduling plugs into other apps, registered once from `SchedulingConfig.ready`:

* the Prometheus collector of the fleet's GPUs by model and state (`metrics.GpuCollector`) in core's registry;
* inventory's GPU holders reader (`ledger.gpu_holders`): the agent commands that re-slice a GPU or change its mode
  are refused while an allocation holds it (docs/adr/0503-re-slicing-guarded-by-the-ledger.md).

The allocation ledger's count of the GPU quotas (``gpus``, ``mig_slices``, ``vgpus``: `selectors.quota_usage`)
is registered by compute (`apps.compute.integrations`), which adds what instances not placed yet hold, so the
one registered counter is the whole usage."""
from __future__ import annotations

from apps.core.metrics import register_collector
from apps.inventory.services.holders import register_gpu_holders

from . import metrics
from .ledger import gpu_holders


def register() -> None:
    register_collector(metrics.COLLECTOR)
    register_gpu_holders(gpu_holders)
