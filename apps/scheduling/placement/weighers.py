"""Weighers: the order among hosts that passed every filter.

* Policy ``binpack`` (default) fills the fullest host that fits, keeping whole hosts free for large requests;
  ``spread`` the emptiest. Chosen per request (a flavor passes it), else per zone from the setting
  ``PLACEMENT_ZONE_POLICIES = {"<zone name>": "spread"}``, else ``PLACEMENT_DEFAULT_POLICY`` (binpack).
* Fractional requests - shares, MIG slices and vGPUs alike - are ranked across hosts by the packing policy of
  `apps.scheduling.policies` (``DEFAULT_POLICY`` = ``ours``, else FGD; the same code the trace simulator
  replays), against a target workload built from the live allocations of the request's form in the ledger (each
  with its consumer's vCPUs and memory on that host) plus this request (FGD paper, Sec. 4: the workload's
  typical task shapes). MIG profiles and vGPU types are sized in
  milli-GPU from the catalog (`fractional`). The host order is `fractional_key`: hosts the policy scored first,
  then the policy score, then the device step's score (`devices`), then the host id. ``spread`` does not pack:
  it ignores the policy score and takes the loosest device fit first (the emptiest GPU that fits).
"""
from __future__ import annotations

from typing import NamedTuple

from django.conf import settings
from django.db import connection

from apps.core import clock

from .fractional import allocation_milli
from .request import PlacementRequest


class PolicyHost(NamedTuple):
    """One host as the packing policy sees it: ``cpu_free_milli`` (milli-vCPUs), ``memory_free_mib``,
    ``gpu_free_milli`` (free milli-GPU per GPU of the request's mode, in device order) and ``request_milli``
    (the request's milli-GPU on this host's GPU model)."""

    name: str
    model: str
    cpu_free_milli: int
    memory_free_mib: int
    gpu_free_milli: tuple[int, ...]
    request_milli: int


def policy_for(req: PlacementRequest) -> str:
    if req.policy:
        return req.policy
    zones = getattr(settings, "PLACEMENT_ZONE_POLICIES", {}) or {}
    if req.zone and req.zone in zones:
        return zones[req.zone]
    return getattr(settings, "PLACEMENT_DEFAULT_POLICY", "binpack")


def fractional_key(policy: str, policy_score: int | None, device_score: float, host_id) -> tuple:
    """Sort key, smallest first, of a host for a share, MIG slice or vGPU.

    Binpack: (not scored by the packing policy, -policy score, -device score, host id). The two scores are
    separate keys: a policy score is an integer on its own scale (``ours``: reserve * 2**48 + FGD * 2**40 +
    capacity change), a device score is 0..1, and a host the policy could not score (the policies package
    failed, or the policy finds the host infeasible) comes after every scored host, ordered by its device score.
    Spread is the opposite of packing: it ignores the policy score and prefers the lowest device score (the
    loosest fit).

    Hosts whose models size the same MIG profile differently (1g.10gb = 125 milli on H100, 250 on A100 40GB) are
    scored in separate policy calls, one per size, and ranked together here. That is sound for ``ours`` and FGD,
    whose scores are absolute (reserve count, FGD's sigmoid of the fragmentation change, capacity copies), not
    normalised per call as best-fit's are."""
    if policy == "spread":
        return (0, 0, float(device_score), str(host_id))
    if policy_score is None:
        return (1, 0, -float(device_score), str(host_id))
    return (0, -int(policy_score), -float(device_score), str(host_id))


def host_key(policy: str, free_gpus_after: int, free_vcpus_after: int) -> tuple:
    """Sort key, smallest first: binpack prefers the least left over, spread the most."""
    sign = 1 if policy != "spread" else -1
    return (sign * free_gpus_after, sign * free_vcpus_after)


# The live target workload is made of allocations of the request's own form only (shares: their amounts; MIG:
# their profiles' milli; vGPU: their types' milli, see `fractional`), the latest 2,000 rows, each with the vCPUs
# and memory its consumer holds on the same host divided by the consumer's units of that form there (FGD's task
# shapes are (CPU, GPU milli); `ours`' capacity tie-break also counts memory). Whole-GPU consumers (multi-GPU
# included) are deliberately left out: they run on GPUs in `exclusive` mode and fractional forms on GPUs in
# `shared` / `mig` / `vgpu` mode (PlacementRequest.gpu_mode), and the hosts given to `policy_scores` list only GPUs
# of the request's mode. `ours`' reserve key for multi-GPU demand (PodTypeDistribution.multi_gpu) would protect
# fully free fractional GPUs that no multi-GPU consumer can use, so the distribution built here has no multi-GPU
# groups and the reserve key stays 0.
WORKLOAD_LIMIT = 2000
_LIVE = "(upper_inf({a}.period) OR upper({a}.period) > %(now)s)"
_LIVE_ALLOCATIONS = f"""
WITH f AS (
    SELECT a.consumer_id, a.host_id, g.model, lower(a.slices) AS lo, upper(a.slices) AS hi, a.amount, a.profile,
           a.created_at, a.id
    FROM scheduling_allocation a LEFT JOIN inventory_gpu g ON g.id = a.gpu_id
    WHERE a.resource_class = %(rc)s AND a.consumer_type <> 'lease' AND {_LIVE.format(a="a")}
    ORDER BY a.created_at DESC, a.id LIMIT %(limit)s)
SELECT f.model, f.lo, f.hi, f.amount, f.profile, COALESCE(h.vcpus, 0), COALESCE(h.memory_mib, 0),
       COALESCE(h.units, 1)
FROM f LEFT JOIN LATERAL (
    SELECT sum(c.amount) FILTER (WHERE c.resource_class = 'vcpu') AS vcpus,
           sum(c.amount) FILTER (WHERE c.resource_class = 'memory_mib') AS memory_mib,
           sum(CASE WHEN c.resource_class <> %(rc)s THEN 0 WHEN %(rc)s = 'vgpu' THEN c.amount ELSE 1 END) AS units
    FROM scheduling_allocation c
    WHERE c.consumer_id = f.consumer_id AND c.host_id = f.host_id
      AND c.resource_class IN ('vcpu', 'memory_mib', %(rc)s) AND {_LIVE.format(a="c")}) h ON true
ORDER BY f.created_at DESC, f.id
"""


def live_workload(form: str, now=None) -> list[tuple[int, int, int]]:
    """The live target workload of ``form`` (``share``, ``mig`` or ``vgpu``): one ``(milli-GPU, cpu_milli,
    memory_mib)`` per unit, latest first, at most ``WORKLOAD_LIMIT`` units. A vGPU row of amount k counts k
    vGPUs. A unit's CPU (1000 per vCPU) and memory are its consumer's vCPU and memory allocations on the same
    host divided by the consumer's units of ``form`` there (floor; 0 when it holds none). Rows the catalog
    cannot size are skipped. Leases are not tasks: their rows (a reserved slice, the lease's vCPUs) are left out,
    the workloads running in them count. "Live" is the ledger's: the period ends after ``now`` (default
    `apps.core.clock.now`, the time the ledger ends rows at, so rows replaced earlier in the same transaction
    are gone), future bookings included."""
    with connection.cursor() as cur:
        cur.execute(_LIVE_ALLOCATIONS, {"rc": form, "limit": WORKLOAD_LIMIT, "now": now or clock.now()})
        rows = cur.fetchall()
    out: list[tuple[int, int, int]] = []
    for model, lo, hi, amount, profile, vcpus, memory_mib, units in rows:
        amount = int(amount or 1)
        if form == "vgpu":  # one entry per vGPU: a request is one vGPU
            copies, amount = amount, 1
        else:
            copies = 1
        milli = allocation_milli(form, model or "", lo=lo, hi=hi, amount=amount, profile=profile or "")
        units = max(int(units), 1)
        if 0 < milli <= 1000:
            out.extend([(milli, int(vcpus) * 1000 // units, int(memory_mib) // units)] * copies)
    return out[:WORKLOAD_LIMIT]


def policy_scores(req: PlacementRequest, hosts: list[PolicyHost]) -> dict:
    """Score hosts for a fractional request (share, MIG slice or vGPU) with the product's packing policy
    (`apps.scheduling.policies.DEFAULT_POLICY`, ``ours``; FGD if it cannot be built). The policy is a constant,
    not a setting: every fractional form uses the same one. `hosts`: `PolicyHost`s; hosts are scored in groups
    of equal request milli (a MIG profile name can mean different sizes on two models).
    Returns {name: (score, position of the policy's GPU in the host's tuple)}; hosts the policy finds infeasible
    are absent, and it is empty when no policy can score (the caller then keeps the device order)."""
    from ..policies import DEFAULT_POLICY, NodeBatch, NodeView, PodRequest, PodTypeDistribution, get_policy

    groups: dict[int, list] = {}
    for h in hosts:
        if 0 < h.request_milli <= 1000:
            groups.setdefault(h.request_milli, []).append(h)
    if not groups:
        return {}
    workload = [PodRequest(cpu_milli=cpu, memory_mib=mem, num_gpu=1, gpu_milli=m)
                for m, cpu, mem in live_workload(req.gpu_form)]
    out: dict = {}
    for milli, members in sorted(groups.items()):
        pod = PodRequest(cpu_milli=req.vcpus * 1000, memory_mib=req.memory_mib, num_gpu=1, gpu_milli=milli)
        dist = PodTypeDistribution.from_requests([*workload, pod])
        batch = NodeBatch.from_views([NodeView(name=h.name, model=h.model, cpu_free_milli=h.cpu_free_milli,
                                               memory_free_mib=h.memory_free_mib, gpu_free_milli=h.gpu_free_milli)
                                      for h in members])
        for name in (DEFAULT_POLICY, "fgd"):
            try:
                policy = get_policy(name, distribution=dist)
                for p in policy.candidates(batch, pod):
                    out[p.node] = (p.score, p.gpus[0] if p.gpus else 0)
                break
            except ValueError:
                continue
    return out

