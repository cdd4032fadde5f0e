"""The erase read-back: after a node was erased, read sample blocks of its disk back and check that they hold no
data (every byte zero). An erase that reports success but left data is a failure: the receipt's
`disk_erase_read_back` step is then `failed`, and the node is held for staff instead of going to the next tenant.

Which blocks: the first and the last block of the disk (partition tables, the GPT backup, the start of the first
filesystem) and `samples - 2` blocks spread evenly in between, each `block` bytes (4096 by default). Ironic's
`erase_devices` (shred or the disk's secure erase) zeroes the whole disk; `erase_devices_metadata` wipes only the
metadata at the start and end of the disk, so the blocks in between still hold data and the read-back fails, as it
should: the tenant's data is still there.
"""
from __future__ import annotations

from apps.core.clock import now

from ..drivers.base import DriverError
from ..drivers.disk import DiskReader

SAMPLES = 16
BLOCK = 4096


def sample_offsets(size: int, *, samples: int = SAMPLES, block: int = BLOCK) -> list[int]:
    """Byte offsets (aligned to `block`) of the blocks to read on a disk of `size` bytes: first, last, and evenly
    spaced in between; fewer on a disk of fewer blocks. Deterministic, sorted, unique."""
    blocks = size // block
    if blocks <= 0:
        return []
    n = min(samples, blocks)
    if n == 1:
        return [0]
    return sorted({round(i * (blocks - 1) / (n - 1)) * block for i in range(n)})


def erase_read_back(disk: DiskReader, *, where: str, samples: int = SAMPLES, block: int = BLOCK) -> dict:
    """Read the sample blocks of `disk` (`where` names it in the detail) and return the receipt step's fields:
    `result` `succeeded` (every sampled byte zero) or `failed` (some block holds data, or the disk could not be
    read), `how` `executed`, `detail`, `started_at`, `finished_at`, `sampled_blocks`, `block_bytes`,
    `blocks_with_data` (their byte offsets)."""
    started = now().isoformat()
    out = {"result": "failed", "how": "executed", "started_at": started, "finished_at": None, "detail": "",
           "sampled_blocks": 0, "block_bytes": block, "blocks_with_data": []}
    try:
        size = disk.size()
        offsets = sample_offsets(size, samples=samples, block=block)
        dirty = [o for o in offsets if any(disk.read(o, block))]
    except DriverError as e:
        out.update(finished_at=now().isoformat(), detail=f"could not read {where} back: {e}")
        return out
    out.update(finished_at=now().isoformat(), sampled_blocks=len(offsets), blocks_with_data=dirty)
    if not offsets:
        out["detail"] = f"{where} has no block to read ({size} bytes)"
    elif dirty:
        out["detail"] = (f"{len(dirty)} of {len(offsets)} sampled blocks of {where} ({size} bytes) still hold data "
                         f"after the erase, first at byte {dirty[0]}")
    else:
        out.update(result="succeeded", detail=f"{len(offsets)} sampled blocks of {block} bytes of {where} "
                                               f"({size} bytes, first and last included) read back as zeros")
    return out
