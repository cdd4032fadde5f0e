"""Weighers: the order among hosts that passed every filter.

* Policy ``binpack`` (default) fills the fullest host that fits, keeping whole hosts free for large requests;
  ``spread`` the emptiest. Chosen per request (a flavor passes it), else per zone from the setting
  ``PLACEMENT_ZONE_POLICIES = {"<zone name>": "spread"}``, else ``PLACEMENT_DEFAULT_POLICY`` (binpack).
* Fractional shares are ranked across hosts by the packing policies of `apps.scheduling.policies` (FGD and
  ``ours``, the same code the trace simulator replays), against a target workload built from the live shares
  in the ledger plus this request (FGD paper, Sec. 4: the workload's typical task shapes).
"""
from __future__ import annotations

from django.conf import settings
from django.db import connection

from .request import PlacementRequest


def policy_for(req: PlacementRequest) -> str:
    if req.policy:
        return req.policy
    zones = getattr(settings, "PLACEMENT_ZONE_POLICIES", {}) or {}
    if req.zone and req.zone in zones:
        return zones[req.zone]
    return getattr(settings, "PLACEMENT_DEFAULT_POLICY", "binpack")


def host_key(policy: str, free_gpus_after: int, free_vcpus_after: int) -> tuple:
    """Sort key, smallest first: binpack prefers the least left over, spread the most."""
    sign = 1 if policy != "spread" else -1
    return (sign * free_gpus_after, sign * free_vcpus_after)


# Only shares make up the live target workload. Whole-GPU consumers (multi-GPU included) are deliberately left
# out: they run on GPUs in `exclusive` mode and shares on GPUs in `shared` mode (PlacementRequest.gpu_mode), and
# the hosts given to `share_scores` list only shared-mode GPUs. `ours`' reserve key for multi-GPU demand
# (PodTypeDistribution.multi_gpu) would protect fully free *shared* GPUs that no multi-GPU consumer can use,
# so the distribution built here has no multi-GPU groups and the reserve key stays 0.
_LIVE_SHARES = """
SELECT a.amount FROM scheduling_allocation a
WHERE a.resource_class = 'share' AND (upper_inf(a.period) OR upper(a.period) > now())
ORDER BY a.created_at DESC LIMIT 2000
"""


def share_scores(req: PlacementRequest, hosts: list[tuple[str, str, int, int, tuple[int, ...]]]) -> dict:
    """Score hosts for a share with the product's packing policy. `hosts`: (name, model, cpu_free_milli,
    memory_free_mib, gpu_free_milli per shared GPU). Returns {name: (score, gpu position)}; empty when the
    policies package cannot score (the caller then keeps its best-fit order)."""
    try:
        from ..policies import (
            DEFAULT_POLICY,
            NodeBatch,
            NodeView,
            PodRequest,
            PodTypeDistribution,
            get_policy,
        )
    except ImportError:  # pragma: no cover - the policies package ships with this app
        return {}
    pod = PodRequest(cpu_milli=req.vcpus * 1000, memory_mib=req.memory_mib, num_gpu=1,
                     gpu_milli=req.share_milli)
    with connection.cursor() as cur:
        cur.execute(_LIVE_SHARES)
        workload = [PodRequest(cpu_milli=0, memory_mib=0, num_gpu=1, gpu_milli=int(a)) for (a,) in cur.fetchall()]
    dist = PodTypeDistribution.from_requests([*workload, pod])
    views = [NodeView(name=n, model=m, cpu_free_milli=c, memory_free_mib=mem, gpu_free_milli=g)
             for n, m, c, mem, g in hosts]
    batch = NodeBatch.from_views(views)
    out = {}
    for name in (DEFAULT_POLICY, "fgd"):
        try:
            policy = get_policy(name, distribution=dist)
            for p in policy.candidates(batch, pod):
                out[p.node] = (p.score, p.gpus[0] if p.gpus else 0)
            return out
        except (ImportError, ValueError):
            continue
    return out
