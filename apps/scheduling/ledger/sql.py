"""Raw SQL of the ledger: host locks, peak-sum checks, the usage summary refresh.

Row sets (mirroring the two exclusion constraints in `apps.scheduling.models`):

* ``holders``   = top-level non-spot rows (leases and on-demand work): ``parent_id IS NULL AND NOT spot``;
* ``workloads`` = rows whose consumer is not a lease (on-demand, spot, nested instances):
  ``consumer_type <> 'lease'``.
"""
from __future__ import annotations

HOLDERS = "a.parent_id IS NULL AND NOT a.spot"
WORKLOADS = "a.consumer_type <> 'lease'"

ENSURE_USAGE_ROWS = """
INSERT INTO scheduling_hostusage (host_id, gpu_model, gpus_exclusive, gpus_busy, vcpus_used, memory_used_mib,
                                  projects, updated_at)
SELECT h, '', 0, 0, 0, 0, '{}', %s FROM unnest(%s::uuid[]) AS h
ON CONFLICT (host_id) DO NOTHING
"""

#: Row locks on the per-host ledger rows, always in host id order (no deadlock between two claims).
LOCK_HOSTS = "SELECT host_id FROM scheduling_hostusage WHERE host_id = ANY(%s) ORDER BY host_id FOR UPDATE"

#: Peak of the sum of ``amount`` over the window: the sum is evaluated at every point where a row of the set
#: starts inside the window (and at the window's start) - the usage is a step function that only rises there.
PEAK_SUM = """
WITH r AS (
  SELECT a.period, a.amount FROM scheduling_allocation a
  WHERE a.host_id = %(host)s AND a.resource_class = %(rc)s
    AND a.gpu_id IS NOT DISTINCT FROM %(gpu)s AND (%(profile)s = '' OR a.profile = %(profile)s)
    AND a.period && %(window)s AND {rowset}
)
SELECT coalesce(max((SELECT sum(r2.amount) FROM r r2 WHERE r2.period @> p.t)), 0)
FROM (SELECT greatest(lower(r.period), lower(%(window)s::tstzrange)) AS t FROM r) p
"""

#: Other vGPU types live on the same GPU during the window (homogeneous vGPU mode: one type per GPU).
OTHER_VGPU_TYPES = """
SELECT DISTINCT a.profile FROM scheduling_allocation a
WHERE a.gpu_id = %(gpu)s AND a.resource_class = 'vgpu' AND a.profile <> %(profile)s AND a.period && %(window)s
"""

#: Recompute the usage summary of some hosts from the ledger (live = end open or after `now`).
REFRESH_USAGE = """
WITH live AS (
  SELECT a.* FROM scheduling_allocation a
  WHERE a.host_id = ANY(%(hosts)s) AND (upper_inf(a.period) OR upper(a.period) > %(now)s)
), agg AS (
  SELECT h AS host_id,
    (SELECT count(DISTINCT l.gpu_id) FROM live l WHERE l.host_id = h AND l.gpu_id IS NOT NULL) AS gpus_busy,
    (SELECT greatest(coalesce(sum(l.amount) FILTER (WHERE l.parent_id IS NULL AND NOT l.spot), 0),
                     coalesce(sum(l.amount) FILTER (WHERE l.consumer_type <> 'lease'), 0))
       FROM live l WHERE l.host_id = h AND l.resource_class = 'vcpu') AS vcpus_used,
    (SELECT greatest(coalesce(sum(l.amount) FILTER (WHERE l.parent_id IS NULL AND NOT l.spot), 0),
                     coalesce(sum(l.amount) FILTER (WHERE l.consumer_type <> 'lease'), 0))
       FROM live l WHERE l.host_id = h AND l.resource_class = 'memory_mib') AS memory_used_mib,
    (SELECT coalesce(array_agg(DISTINCT l.project_id), '{}') FROM live l WHERE l.host_id = h) AS projects,
    (SELECT l.project_id FROM live l JOIN scheduling_consumer c ON c.id = l.consumer_id
       WHERE l.host_id = h AND c.dedicated LIMIT 1) AS dedicated_project_id,
    (SELECT coalesce(min(g.model), '') FROM inventory_gpu g WHERE g.host_id = h) AS gpu_model,
    (SELECT count(*) FROM inventory_gpu g WHERE g.host_id = h AND g.mode = 'exclusive' AND g.health = 'ok')
       AS gpus_exclusive
  FROM unnest(%(hosts)s::uuid[]) AS h
)
UPDATE scheduling_hostusage u SET gpus_busy = agg.gpus_busy, vcpus_used = agg.vcpus_used,
  memory_used_mib = agg.memory_used_mib, projects = agg.projects, dedicated_project_id = agg.dedicated_project_id,
  gpu_model = agg.gpu_model, gpus_exclusive = agg.gpus_exclusive, updated_at = %(now)s
FROM agg WHERE u.host_id = agg.host_id
"""
