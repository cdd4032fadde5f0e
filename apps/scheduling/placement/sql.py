"""Set-based SQL of placement. Every query takes a ``window`` tstzrange and a ``{conflict}`` row-set predicate
over ``scheduling_allocation a`` (see `conflict_predicate`)."""
from __future__ import annotations

import uuid
from typing import NamedTuple

from ..ledger.sql import HOLDERS, WORKLOADS


def conflict_predicate(*, consumer_type: str, spot: bool, nested: bool) -> str:
    """Rows a new allocation must not overlap, mirroring the two exclusion constraints: a lease checks the
    holders set, spot and nested rows the workloads set, on-demand rows both."""
    if consumer_type == "lease":
        return HOLDERS
    if spot or nested:
        return WORKLOADS
    return f"(({HOLDERS}) OR ({WORKLOADS}))"


#: CTE body (``cc``): per host, the vCPUs and memory held over the window by holders (``vcpu_h`` / ``mem_h``) and
#: by workloads (``vcpu_w`` / ``mem_w``); `_Ctx.countable_used` (or its SQL twin) picks which count.
_HOST_COUNTABLES = """
  SELECT a.host_id,
    coalesce(sum(a.amount) FILTER (WHERE a.resource_class = 'vcpu' AND {holders}), 0) AS vcpu_h,
    coalesce(sum(a.amount) FILTER (WHERE a.resource_class = 'vcpu' AND {workloads}), 0) AS vcpu_w,
    coalesce(sum(a.amount) FILTER (WHERE a.resource_class = 'memory_mib' AND {holders}), 0) AS mem_h,
    coalesce(sum(a.amount) FILTER (WHERE a.resource_class = 'memory_mib' AND {workloads}), 0) AS mem_w
  FROM scheduling_allocation a
  WHERE a.resource_class IN ('vcpu', 'memory_mib') AND a.period && %(window)s
  GROUP BY a.host_id
"""

class ExactHostRow(NamedTuple):
    """A row of `EXACT_HOSTS`. ``vcpu_h``/``mem_h``: vCPUs/MiB held over the window by holders, ``vcpu_w``/
    ``mem_w``: by workloads; ``n_model``/``n_mode``/``n_healthy``: the host's GPUs of a requested model, of them in
    the requested mode, of those healthy; ``free_idx``/``free_numa``: index and NUMA node of each free GPU
    (ascending index); ``projects``: projects with live work on the host; ``dedicated_project_id``: the project
    the host is dedicated to, if any; ``spare``: held in the spare pool (never placed on)."""

    id: uuid.UUID
    name: str
    state: str
    zone_id: uuid.UUID | None
    provisioning_kind: str
    cpu_threads: int
    memory_mib: int
    nvswitch_system: str | None
    vcpu_h: int
    vcpu_w: int
    mem_h: int
    mem_w: int
    n_model: int
    n_mode: int
    n_healthy: int
    free_idx: list[int]
    free_numa: list[int]
    projects: list[uuid.UUID]
    dedicated_project_id: uuid.UUID | None
    spare: bool


#: GPUs with an `apply_mig_layout` queued for (or dispatched to) their agent: not placed on until the agent reports
#: (their mode or layout is about to change; docs/adr/0503). Few rows, read through the command status index.
_LAYOUT_CHANGING = """SELECT c.gpu_id FROM inventory_agentcommand c
  WHERE c.status IN ('queued', 'dispatched') AND c.kind = 'apply_mig_layout' AND c.gpu_id IS NOT NULL"""

#: One row per host (`ExactHostRow`): state, capacity left over the window and, for whole-GPU requests, the free
#: GPUs' indexes and NUMA nodes (small integers: cheap to ship for 10,000 hosts; GPU ids are resolved for the
#: winners only).
EXACT_HOSTS = """
WITH busy AS (
  SELECT a.gpu_id FROM scheduling_allocation a
  WHERE a.slices IS NOT NULL AND a.period && %(window)s AND ({conflict})
  UNION """ + _LAYOUT_CHANGING + """
), gg AS (
  SELECT g.host_id,
    count(*) FILTER (WHERE {model_ok}) AS n_model,
    count(*) FILTER (WHERE {model_ok} AND g.mode = %(mode)s) AS n_mode,
    count(*) FILTER (WHERE {model_ok} AND g.mode = %(mode)s AND g.health = 'ok' AND (g.scrub_state = 'clean' OR NOT %(starts_now)s)) AS n_healthy,
    array_agg(g.index ORDER BY g.index) FILTER (WHERE {free}) AS free_idx,
    array_agg(g.numa_node ORDER BY g.index) FILTER (WHERE {free}) AS free_numa
  FROM inventory_gpu g LEFT JOIN busy b ON b.gpu_id = g.id
  GROUP BY g.host_id
), cc AS (""" + _HOST_COUNTABLES + """)
SELECT h.id, h.name, h.state, h.zone_id, h.provisioning_kind, h.cpu_threads, h.memory_mib, h.nvswitch_system,
  coalesce(cc.vcpu_h, 0), coalesce(cc.vcpu_w, 0), coalesce(cc.mem_h, 0), coalesce(cc.mem_w, 0),
  coalesce(gg.n_model, 0), coalesce(gg.n_mode, 0), coalesce(gg.n_healthy, 0), coalesce(gg.free_idx, '{{}}'), coalesce(gg.free_numa, '{{}}'),
  coalesce(u.projects, '{{}}'), u.dedicated_project_id, h.spare
FROM inventory_host h
LEFT JOIN gg ON gg.host_id = h.id
LEFT JOIN cc ON cc.host_id = h.id
LEFT JOIN scheduling_hostusage u ON u.host_id = h.id
"""

class FastHostRow(NamedTuple):
    """A row of `FAST_HOSTS`, in rank order; ``numa_nodes`` .. ``numa_report``: what `HOST_NUMA` reads (`NUMA_COLUMNS`),
    or zeros and NULL when the request has no guest NUMA nodes to fit."""

    id: uuid.UUID
    name: str
    nvswitch_system: str | None
    numa_nodes: int
    cpu_cores: int
    cpu_threads: int
    memory_mib: int
    numa_report: object


#: Fast path for on-demand whole-GPU (or CPU-only) requests (`FastHostRow`): pre-rank on the per-host usage
#: summary, walking the (gpu_model, gpus_free, host) index in rank order and stopping at LIMIT (a few dozen index
#: tuples).
FAST_HOSTS = """
SELECT h.id, h.name, h.nvswitch_system, {numa} FROM scheduling_hostusage u JOIN inventory_host h ON h.id = u.host_id
WHERE {model_filter} u.gpus_free >= %(gpus)s
  AND h.state = 'available' AND NOT h.spare
  AND (%(kind)s = '' OR h.provisioning_kind = %(kind)s)
  AND (%(zone)s::uuid IS NULL OR h.zone_id = %(zone)s::uuid)
  AND (cardinality(%(exclude)s::uuid[]) = 0 OR NOT (h.id = ANY(%(exclude)s::uuid[])))
  AND h.cpu_threads - u.vcpus_used >= %(vcpus)s
  AND h.memory_mib - u.memory_used_mib >= %(memory)s
  AND (u.dedicated_project_id IS NULL OR u.dedicated_project_id = %(project)s::uuid)
  AND (NOT %(dedicated)s OR u.projects <@ ARRAY[%(project)s::uuid])
ORDER BY {model_order} u.gpus_free {direction}, u.host_id {direction}
LIMIT %(limit)s
"""

#: Free whole GPUs of some hosts (device step of the fast path).
FREE_GPUS = """
SELECT g.host_id, g.id, g.index, g.numa_node, g.model FROM inventory_gpu g
WHERE g.host_id = ANY(%(hosts)s::uuid[]) AND g.mode = %(mode)s AND g.health = 'ok' AND (g.scrub_state = 'clean' OR NOT %(starts_now)s) AND {model_ok}
  AND g.id NOT IN (""" + _LAYOUT_CHANGING + """)
  AND NOT EXISTS (SELECT 1 FROM scheduling_allocation a
                  WHERE a.gpu_id = g.id AND a.slices IS NOT NULL AND a.period && %(window)s AND ({conflict}))
ORDER BY g.host_id, g.index
"""

#: GPUs of some hosts in one mode with the allocations that overlap the window (MIG, vGPU, share steps) and the
#: GPU instances recorded on the host (``{gpu_instances}``: the subquery, or ``'[]'::json`` for the ideal fleet);
#: ``{gpu_ok}`` is the mode and health predicate (TRUE for the ideal fleet).
GPU_OCCUPANCY = """
SELECT g.host_id, g.id, g.index, g.numa_node, g.model,
  coalesce(json_agg(json_build_object('rc', a.resource_class, 'lo', lower(a.slices), 'hi', upper(a.slices),
                                      'amount', a.amount, 'profile', a.profile, 'parent', a.parent_id))
           FILTER (WHERE a.id IS NOT NULL), '[]'),
  {gpu_instances}
FROM inventory_gpu g
LEFT JOIN scheduling_allocation a ON a.gpu_id = g.id AND a.period && %(window)s AND ({conflict})
WHERE g.host_id = ANY(%(hosts)s::uuid[]) AND {gpu_ok} AND {model_ok} {lease_gpu}
GROUP BY g.id
ORDER BY g.host_id, g.index
"""

#: The GPU instances recorded on a GPU (`inventory.GpuInstance`: made by placement's claims, by staff commands or
#: adopted from the agent's report) as [{profile, start, size}].
GPU_INSTANCES = """(SELECT coalesce(json_agg(json_build_object('profile', gi.profile, 'start', gi.start, 'size', gi.size)),
  '[]') FROM inventory_gpuinstance gi WHERE gi.gpu_id = g.id)"""

#: A GPU whose MIG layout change is queued for its agent is not placed on until the agent reported it.
NO_LAYOUT_CHANGE_PENDING = """NOT EXISTS (SELECT 1 FROM inventory_agentcommand c WHERE c.gpu_id = g.id
  AND c.kind = 'apply_mig_layout' AND c.status IN ('queued', 'dispatched'))"""

#: Hosts with a live allocation of an affinity group's consumers.
GROUP_HOSTS = """
SELECT DISTINCT a.host_id FROM scheduling_allocation a JOIN scheduling_consumer c ON c.id = a.consumer_id
WHERE c."group" = %(group)s AND c.project_id = %(project)s AND a.period && %(window)s
"""

#: The lease's holding over the whole window: hosts and GPUs.
LEASE_HOLDING = """
SELECT a.host_id, a.gpu_id FROM scheduling_allocation a
WHERE a.consumer_id = %(lease)s AND a.consumer_type = 'lease' AND a.period @> %(window)s
"""

#: What `apps.inventory.numa.node_caps` reads of a host (``h``): the recorded counts and the agent's NUMA report.
NUMA_COLUMNS = "h.numa_nodes, h.cpu_cores, h.cpu_threads, h.memory_mib, h.observed -> 'host' -> 'numa'"
NO_NUMA_COLUMNS = "0, 0, 0, 0, NULL"
HOST_NUMA = "SELECT h.id, " + NUMA_COLUMNS + " FROM inventory_host h WHERE h.id = ANY(%(hosts)s::uuid[])"

#: GPU ids of some hosts by index (resolving the exact path's winners).
GPU_IDS = """
SELECT g.host_id, g.index, g.id FROM inventory_gpu g WHERE g.host_id = ANY(%(hosts)s::uuid[])
"""

class WindowHostRow(NamedTuple):
    """A row of `WINDOW_HOSTS`, in rank order: the free GPUs' indexes and NUMA nodes over the window (ascending
    index) and the vCPUs left free (before the request)."""

    id: uuid.UUID
    name: str
    nvswitch_system: str | None
    free_idx: list[int]
    free_numa: list[int]
    vcpus_free: int


#: Window fast path (`WindowHostRow`; whole GPUs over a time window: leases, future on-demand): one set-based pass that keeps
#: only the hosts passing the static filters (state, kind, zone, exclusion, tenant isolation), counts each one's
#: free GPUs over the window with the exact path's busy-GPU predicate (a count and an index bitmask per host:
#: no per-host sort), keeps hosts with at least ``gpus`` free and ranks them in SQL with the exact path's key
#: (free GPUs left over, then free vCPUs left over, then host id; binpack ascending, spread descending).
#: Only the returned hosts get their free GPUs' indexes and NUMA nodes. ``{limit}`` is empty (every host, for
#: gangs) or ``LIMIT n``; ``{vcpus_used}`` / ``{memory_used}`` are the request's countable use
#: (`_Ctx.countable_used`) over the holders (``vcpu_h``/``mem_h``) and workloads (``vcpu_w``/``mem_w``) sums.
WINDOW_HOSTS = """
WITH cand AS (
  SELECT h.id, h.name, h.nvswitch_system, h.cpu_threads, h.memory_mib FROM inventory_host h
  LEFT JOIN scheduling_hostusage u ON u.host_id = h.id
  WHERE h.state = 'available' AND NOT h.spare
    AND (%(kind)s = '' OR h.provisioning_kind = %(kind)s)
    AND (%(zone)s::uuid IS NULL OR h.zone_id = %(zone)s::uuid)
    AND (cardinality(%(exclude)s::uuid[]) = 0 OR NOT (h.id = ANY(%(exclude)s::uuid[])))
    AND (u.dedicated_project_id IS NULL OR u.dedicated_project_id = %(project)s::uuid)
    AND (NOT %(dedicated)s OR coalesce(u.projects, '{{}}') <@ ARRAY[%(project)s::uuid])
), busy AS (
  SELECT a.gpu_id FROM scheduling_allocation a
  WHERE a.slices IS NOT NULL AND a.period && %(window)s AND ({conflict})
  UNION """ + _LAYOUT_CHANGING + """
), free AS (
  SELECT g.host_id, count(*) AS n, bit_or(1::bigint << g.index) AS mask
  FROM inventory_gpu g LEFT JOIN busy b ON b.gpu_id = g.id
  WHERE {model_ok} AND g.mode = %(mode)s AND g.health = 'ok' AND (g.scrub_state = 'clean' OR NOT %(starts_now)s) AND b.gpu_id IS NULL
  GROUP BY g.host_id HAVING count(*) >= %(gpus)s
), cc AS (""" + _HOST_COUNTABLES + """), top AS (
  SELECT c.id, c.name, c.nvswitch_system, f.mask, c.cpu_threads - {vcpus_used} AS vcpus_free
  FROM free f JOIN cand c ON c.id = f.host_id LEFT JOIN cc ON cc.host_id = f.host_id
  WHERE c.cpu_threads - {vcpus_used} >= %(vcpus)s AND c.memory_mib - {memory_used} >= %(memory)s
  ORDER BY f.n {direction}, c.cpu_threads - {vcpus_used} {direction}, c.id::text COLLATE "C"
  {limit}
)
SELECT t.id, t.name, t.nvswitch_system, x.idx, x.numa, t.vcpus_free
FROM top t CROSS JOIN LATERAL (
  SELECT array_agg(g.index ORDER BY g.index) AS idx, array_agg(g.numa_node ORDER BY g.index) AS numa
  FROM inventory_gpu g WHERE g.host_id = t.id AND (t.mask >> g.index) & 1 = 1
) x
ORDER BY cardinality(x.idx) {direction}, t.vcpus_free {direction}, t.id::text COLLATE "C"
"""
