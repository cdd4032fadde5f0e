"""The allocation ledger (the only writer of `Allocation` rows). See `core` and docs/adr/0400-allocation-ledger.md."""
from .core import (
    AllocationSpec,
    ConsumerRef,
    allocations_claim,
    allocations_move_host,
    allocations_release,
    gpu_holders,
    lock_hosts,
    refresh_usage,
)

__all__ = ["AllocationSpec", "ConsumerRef", "allocations_claim", "allocations_move_host", "allocations_release", "gpu_holders", "lock_hosts",
           "refresh_usage"]
