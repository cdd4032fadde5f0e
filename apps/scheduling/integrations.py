"""What scheduling plugs into other apps, registered once from `SchedulingConfig.ready`: nothing at present.

The allocation ledger's count of the GPU quotas (``gpus``, ``mig_slices``, ``vgpus``: `selectors.quota_usage`)
is registered by compute (`apps.compute.integrations`), which adds what instances not placed yet hold, so the
one registered counter is the whole usage."""
from __future__ import annotations


def register() -> None:
    return None
