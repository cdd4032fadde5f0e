"""Who holds a GPU in the allocation ledger, as inventory needs to know it before re-slicing one.

Inventory sits below scheduling (the ledger's owner), so the ledger's reader is registered here by scheduling
(`apps.scheduling.integrations`): `fn(*, host_id, gpu_ids, lock=True) -> {gpu id: [holder]}`, a holder being
{"allocation_id", "consumer_type", "consumer_id", "resource_class", "slices": [lo, hi] | None, "profile",
"start", "end"} for every allocation whose period has not ended; with `lock` the host's ledger row is locked so
no claim lands on the host before the caller's transaction ends.

`gpu_guard_free` is the guard of every change of a GPU's slicing or mode (docs/adr/0503): it reads the ledger,
never the vGPU rows compute does not write.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

from apps.core.clock import now

from ..errors import GpuAllocated, VfAllocated
from ..models import Gpu

GpuHoldersReader = Callable[..., dict]
_READERS: list[GpuHoldersReader] = []


def register_gpu_holders(fn: GpuHoldersReader) -> None:
    if fn not in _READERS:
        _READERS.append(fn)


def gpu_holders(*, host_id, gpu_ids: Sequence, lock: bool = True) -> dict:
    """{gpu id: [holder]} from the registered ledger reader. Raises RuntimeError when none is registered (the
    scheduling app is required: a guard that silently reads nothing would let a re-slice through)."""
    if not _READERS:
        raise RuntimeError("no GPU holders reader registered (apps.scheduling must be installed)")
    out: dict = {}
    for fn in _READERS:
        for gpu_id, rows in fn(host_id=host_id, gpu_ids=list(gpu_ids), lock=lock).items():
            out.setdefault(gpu_id, []).extend(rows)
    return out


def _overlaps(holder: dict, slices: tuple[int, int] | None) -> bool:
    if slices is None or holder["slices"] is None:
        return True  # the whole GPU, or a countable (vGPU, VF, share) on it: any change touches it
    lo, hi = holder["slices"]
    return lo < slices[1] and slices[0] < hi


def _label(h: dict) -> str:
    what = h["resource_class"] + (f" {h['profile']}" if h["profile"] else "")
    where = f" slices [{h['slices'][0]}, {h['slices'][1]})" if h["slices"] else ""
    until = f"until {h['end']}" if h["end"] else "open-ended"
    return f"{h['consumer_type']} {h['consumer_id']} ({what}{where}, from {h['start']}, {until})"


def gpu_guard_free(gpu: Gpu, *, action: str, slices: tuple[int, int] | None = None, started_only: bool = False) -> None:
    """Refuse `action` on `gpu` while an allocation holds it (or, with `slices` = memory slices [lo, hi), holds
    slices that overlap them; with `started_only`, only allocations whose period has begun: a reset harms no
    lease that starts later). Call inside the transaction that records the change: the host's ledger row stays
    locked until it ends. Raises GpuAllocated (409 `gpu_allocated`, `gpu_index`, `holders`)."""
    at = now()
    held = [h for h in gpu_holders(host_id=gpu.host_id, gpu_ids=[gpu.pk]).get(gpu.pk, [])
            if _overlaps(h, slices) and not (started_only and dt.datetime.fromisoformat(h["start"]) > at)]
    if held:
        raise GpuAllocated(
            f"GPU {gpu.index} of host {gpu.host.name} is held by {len(held)} allocation(s): "
            + "; ".join(_label(h) for h in held[:5]) + (" ..." if len(held) > 5 else "")
            + f". {action} is refused until they are released (delete or move the instances, end the leases).",
            gpu_index=gpu.index, holders=held)


#: Who holds an SR-IOV VF (a GPU's for a vGPU, an HCA's for RDMA): registered by compute, whose instances record
#: the VFs they hold (`apps.compute.services.devices.vfs_held`): `fn(*, host_id, addresses) -> {address: [ids]}`.
_VF_READERS: list[Callable[..., dict]] = []


def register_vf_holders(fn: Callable[..., dict]) -> None:
    if fn not in _VF_READERS:
        _VF_READERS.append(fn)


def vf_guard_free(host, address: str, *, action: str) -> None:
    """Refuse `action` on the VF at PCI `address` of `host` while an instance holds it (a reset or a new vGPU type
    under a running VM takes its device away). Raises VfAllocated (409 `vf_allocated`, `vf_address`, `holders`)
    and RuntimeError when no reader is registered (apps.compute must be installed)."""
    if not _VF_READERS:
        raise RuntimeError("no VF holders reader registered (apps.compute must be installed)")
    held: list = []
    for fn in _VF_READERS:
        held += fn(host_id=host.pk, addresses=[address]).get(address, [])
    if held:
        raise VfAllocated(f"SR-IOV VF {address} of host {host.name} is held by instance(s) {', '.join(held)}. "
                          f"{action} is refused until they are deleted.", vf_address=address, holders=held)
