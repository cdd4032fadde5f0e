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
LOCK_HOSTS = """
SELECT u.host_id, h.cpu_threads, h.memory_mib FROM scheduling_hostusage u JOIN inventory_host h ON h.id = u.host_id
WHERE u.host_id = ANY(%s) ORDER BY u.host_id FOR UPDATE OF u
"""

#: All peak checks of one claim in one round trip. Check i: host, class, GPU, vGPU type, and which row set
#: (h = holders, w = workloads, p = children of `parent`); every check uses the claim's window.
PEAK_SUMS = """
SELECT c.i, coalesce((
  SELECT max((SELECT sum(r2.amount) FROM scheduling_allocation r2
              WHERE r2.host_id = c.host AND r2.resource_class = c.rc AND r2.gpu_id IS NOT DISTINCT FROM c.gpu
                AND (c.profile = '' OR r2.profile = c.profile) AND r2.period && %(window)s
                AND ((c.kind = 'h' AND r2.parent_id IS NULL AND NOT r2.spot)
                  OR (c.kind = 'w' AND r2.consumer_type <> 'lease') OR (c.kind = 'p' AND r2.parent_id = c.parent))
                AND r2.period @> greatest(lower(r.period), lower(%(window)s::tstzrange))))
  FROM scheduling_allocation r
  WHERE r.host_id = c.host AND r.resource_class = c.rc AND r.gpu_id IS NOT DISTINCT FROM c.gpu
    AND (c.profile = '' OR r.profile = c.profile) AND r.period && %(window)s
    AND ((c.kind = 'h' AND r.parent_id IS NULL AND NOT r.spot)
      OR (c.kind = 'w' AND r.consumer_type <> 'lease') OR (c.kind = 'p' AND r.parent_id = c.parent))
), 0)
FROM unnest(%(i)s::int[], %(host)s::uuid[], %(rc)s::text[], %(gpu)s::uuid[], %(profile)s::text[],
            %(kind)s::text[], %(parent)s::uuid[]) AS c(i, host, rc, gpu, profile, kind, parent)
"""

#: Insert-or-lock the consumer row in one statement (ON CONFLICT DO UPDATE takes the row lock).
UPSERT_CONSUMER = """
INSERT INTO scheduling_consumer (id, consumer_type, project_id, generation, "group", dedicated, created_at,
                                 updated_at)
VALUES (%(id)s, %(type)s, %(project)s, 0, %(group)s, %(dedicated)s, %(now)s, %(now)s)
ON CONFLICT (id) DO UPDATE SET updated_at = EXCLUDED.updated_at
RETURNING consumer_type, project_id, generation
"""

#: Other vGPU types live on the same GPU during the window (homogeneous vGPU mode: one type per GPU).
OTHER_VGPU_TYPES = """
SELECT DISTINCT a.profile FROM scheduling_allocation a
WHERE a.gpu_id = %(gpu)s AND a.resource_class = 'vgpu' AND a.profile <> %(profile)s AND a.period && %(window)s
"""

#: Recompute the usage summary of some hosts from the ledger (live = end open or after `now`); one pass.
REFRESH_USAGE = """
WITH bump AS (
  UPDATE scheduling_consumer SET generation = generation + 1, updated_at = %(now)s WHERE id = %(consumer)s
), live AS (
  SELECT a.* FROM scheduling_allocation a
  WHERE a.host_id = ANY(%(hosts)s) AND (upper_inf(a.period) OR upper(a.period) > %(now)s)
), agg AS (
  SELECT h AS host_id, count(DISTINCT l.gpu_id) AS gpus_busy,
    greatest(coalesce(sum(l.amount) FILTER (WHERE l.resource_class = 'vcpu' AND l.parent_id IS NULL AND NOT l.spot), 0),
             coalesce(sum(l.amount) FILTER (WHERE l.resource_class = 'vcpu' AND l.consumer_type <> 'lease'), 0))
      AS vcpus_used,
    greatest(coalesce(sum(l.amount) FILTER (WHERE l.resource_class = 'memory_mib' AND l.parent_id IS NULL
                                             AND NOT l.spot), 0),
             coalesce(sum(l.amount) FILTER (WHERE l.resource_class = 'memory_mib' AND l.consumer_type <> 'lease'), 0))
      AS memory_used_mib,
    coalesce(array_agg(DISTINCT l.project_id) FILTER (WHERE l.project_id IS NOT NULL), '{}') AS projects,
    (SELECT l2.project_id FROM live l2 JOIN scheduling_consumer c ON c.id = l2.consumer_id
      WHERE l2.host_id = h AND c.dedicated LIMIT 1) AS dedicated_project_id,
    (SELECT coalesce(min(g.model), '') FROM inventory_gpu g WHERE g.host_id = h) AS gpu_model,
    (SELECT count(*) FROM inventory_gpu g WHERE g.host_id = h AND g.mode = 'exclusive' AND g.health = 'ok' AND g.scrub_state = 'clean')
      AS gpus_exclusive
  FROM unnest(%(hosts)s::uuid[]) AS h LEFT JOIN live l ON l.host_id = h
  GROUP BY h
)
UPDATE scheduling_hostusage u SET gpus_busy = agg.gpus_busy, vcpus_used = agg.vcpus_used,
  memory_used_mib = agg.memory_used_mib, projects = agg.projects, dedicated_project_id = agg.dedicated_project_id,
  gpu_model = agg.gpu_model, gpus_exclusive = agg.gpus_exclusive, updated_at = %(now)s
FROM agg WHERE u.host_id = agg.host_id
"""
