"""Milli-GPU sizes of the fractional forms (shares, MIG slices, vGPUs) as the packing policy sees them.

The packing policies of `apps.scheduling.policies` (FGD, ``ours``) see a GPU as 1000 milli-GPU and a request as
the milli-GPU it takes on one GPU. A share is milli-GPU already; a MIG profile and a vGPU type are converted
from the GPU catalog (`apps.inventory.catalog`):

* **MIG profile**: ``ceil(1000 * memory slices of the profile / memory slices of the model)``. Memory slices,
  not compute slices, because they are what a GPU instance *occupies*: the NVIDIA MIG User Guide ("Concepts";
  the placement lists of "Supported MIG Profiles" / ``nvidia-smi mig -lgipp``) places an instance on the memory
  slices ``[start, start + memory)``, and instances may not overlap there; our MIG planner
  (`apps.inventory.mig`) and the ledger's ``slices`` range count the same 8 memory slices. With compute slices
  two 3g.40gb (3 of 7 compute each) would look like 857 milli and leave a phantom 143 free, although their 4 + 4
  memory slices fill the GPU; 1g.20gb (1 compute, 2 memory) would look like 143 although four of them fill
  the GPU. H100 80GB: 1g.10gb = 125, 1g.20gb = 250, 2g.20gb = 250, 3g.40gb = 500, 4g.40gb = 500,
  7g.80gb = 1000.
* **vGPU type**: ``ceil(1000 / max instances per GPU)``. The NVIDIA vGPU user guide ("Virtual GPU Types"):
  a type fixes the framebuffer each vGPU gets, so a GPU holds at most the catalog's ``max`` of that type
  (H100XM-40C: 2 -> 500; H100XM-5C: 16 -> 63). MIG-backed vGPU types use the same rule: the device filter
  (`devices.vgpu_options`) counts them against the same ``max``.

A GPU's free milli for the policy (`policy_free_milli`): shares: ``devices.share_free_milli`` (unchanged).
MIG / vGPU: 0 when the device filter says one more unit of the requested profile / type cannot go on that GPU
(MIG geometry or compute limit, another vGPU type, another mode of use, ...): the policy must not pick a GPU
NVIDIA's rules forbid. Otherwise ``1000 - the milli of the live allocations of the same form on it``, raised to
at least the request's milli (the ceilings can overshoot: 7 x 143 > 1000 for a type with max 7, yet the 7th
fits).
"""
from __future__ import annotations

from apps.inventory.catalog import gpu_model_get

from ..models import GPU_SLICES
from .devices import GpuRow, share_free_milli

MILLI = 1000


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def mig_slices_milli(memory_slices: int, model_slices: int = GPU_SLICES) -> int:
    """Milli-GPU of a GPU instance on ``memory_slices`` of a model's ``model_slices`` memory slices."""
    return _ceil_div(MILLI * memory_slices, model_slices)


def fractional_milli(form: str, model: str, name: str = "", amount: int = 0) -> int | None:
    """Milli-GPU one unit of a fractional form takes on one GPU of ``model`` (a catalog key).

    ``form``: ``share`` (``amount`` milli-GPU), ``mig`` (``name``: the model's profile name or id) or ``vgpu``
    (``name``: the vGPU type). None when the catalog does not know the model, profile or type."""
    if form == "share":
        return amount
    spec = gpu_model_get(model)
    if spec is None:
        return None
    if form == "mig":
        profile = spec.mig.profile(name) if spec.mig else None
        return mig_slices_milli(profile.memory, spec.mig.memory_slices) if profile else None
    if form == "vgpu":
        vtype = next((t for t in spec.vgpu_types if t.name == name), None)
        return _ceil_div(MILLI, vtype.max) if vtype and vtype.max > 0 else None
    return None


def allocation_milli(rc: str, model: str, *, lo: int | None = None, hi: int | None = None, amount: int = 1,
                     profile: str = "") -> int:
    """Milli-GPU a live ledger row holds on a GPU of ``model`` (0 when unknown): shares their amount, MIG their
    memory-slice range, vGPUs ``amount`` times the type's milli."""
    if rc == "share":
        return amount
    if rc == "mig":
        if lo is None or hi is None:
            return 0
        spec = gpu_model_get(model)
        return mig_slices_milli(hi - lo, spec.mig.memory_slices if spec and spec.mig else GPU_SLICES)
    if rc == "vgpu":
        return amount * (fractional_milli("vgpu", model, profile) or 0)
    return 0


def policy_free_milli(form: str, g: GpuRow, request_milli: int | None, placeable: bool) -> int:
    """Free milli-GPU of GPU ``g`` for the packing policy (see the module docstring). ``placeable``: the device
    filter accepts one more unit of the request on ``g`` (ignored for shares)."""
    if form == "share":
        return share_free_milli(g)
    if not placeable or not request_milli:
        return 0
    used = sum(allocation_milli(a["rc"], g.model, lo=a.get("lo"), hi=a.get("hi"), amount=a.get("amount") or 1,
                                profile=a.get("profile") or "")
               for a in g.occupancy if a["rc"] == form)
    return min(MILLI, max(request_milli, MILLI - used))
