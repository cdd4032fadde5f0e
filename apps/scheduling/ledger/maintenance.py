"""Ledger housekeeping: rebuild every host's usage summary, and find orphaned allocations.

Orphans (RW-066; nova-manage placement audit): live allocations whose consumer no longer exists in the app
that owns it. Each owner registers a resolver for its consumer type::

    from apps.scheduling.ledger.maintenance import register_consumer_resolver
    register_consumer_resolver("instance", lambda ids: set(Instance.objects.filter(id__in=ids)
                                                              .exclude(status=InstanceStatus.DELETED)
                                                              .values_list("id", flat=True)))

`ledger_audit(remove=True)` releases what it reports. Consumer types without a resolver are listed as
unchecked, never touched.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

from django.db import connection
from django.db.models import Q

from apps.core import clock

from ..models import Allocation
from .core import allocations_release

ConsumerResolver = Callable[[Iterable[uuid.UUID]], set]
_RESOLVERS: dict[str, ConsumerResolver] = {}

REFRESH_ALL = """
WITH live AS (
  SELECT a.* FROM scheduling_allocation a WHERE upper_inf(a.period) OR upper(a.period) > %(now)s
), agg AS (
  SELECT l.host_id, count(DISTINCT l.gpu_id) AS gpus_busy,
    greatest(coalesce(sum(l.amount) FILTER (WHERE l.resource_class = 'vcpu' AND l.parent_id IS NULL AND NOT l.spot), 0),
             coalesce(sum(l.amount) FILTER (WHERE l.resource_class = 'vcpu' AND l.consumer_type <> 'lease'), 0))
      AS vcpus_used,
    greatest(coalesce(sum(l.amount) FILTER (WHERE l.resource_class = 'memory_mib' AND l.parent_id IS NULL
                                             AND NOT l.spot), 0),
             coalesce(sum(l.amount) FILTER (WHERE l.resource_class = 'memory_mib' AND l.consumer_type <> 'lease'), 0))
      AS memory_used_mib,
    array_agg(DISTINCT l.project_id) AS projects
  FROM live l GROUP BY l.host_id
), ded AS (
  SELECT DISTINCT ON (l.host_id) l.host_id, l.project_id FROM live l
  JOIN scheduling_consumer c ON c.id = l.consumer_id WHERE c.dedicated ORDER BY l.host_id
), gs AS (
  SELECT g.host_id, min(g.model) AS model,
         count(*) FILTER (WHERE g.mode = 'exclusive' AND g.health = 'ok' AND g.scrub_state = 'clean') AS n
  FROM inventory_gpu g GROUP BY g.host_id
)
INSERT INTO scheduling_hostusage (host_id, gpu_model, gpus_exclusive, gpus_busy, vcpus_used, memory_used_mib,
                                  projects, dedicated_project_id, updated_at)
SELECT h.id, coalesce(gs.model, ''), coalesce(gs.n, 0), coalesce(agg.gpus_busy, 0), coalesce(agg.vcpus_used, 0),
       coalesce(agg.memory_used_mib, 0), coalesce(agg.projects, '{}'), ded.project_id, %(now)s
FROM inventory_host h LEFT JOIN agg ON agg.host_id = h.id LEFT JOIN ded ON ded.host_id = h.id
LEFT JOIN gs ON gs.host_id = h.id
ON CONFLICT (host_id) DO UPDATE SET gpu_model = EXCLUDED.gpu_model, gpus_exclusive = EXCLUDED.gpus_exclusive,
  gpus_busy = EXCLUDED.gpus_busy, vcpus_used = EXCLUDED.vcpus_used, memory_used_mib = EXCLUDED.memory_used_mib,
  projects = EXCLUDED.projects, dedicated_project_id = EXCLUDED.dedicated_project_id, updated_at = EXCLUDED.updated_at
"""


def ledger_usage_refresh_all() -> int:
    """Rebuild the usage summary of every host from the ledger and the GPU rows (health / mode changes made
    by inventory reach the summary here). Set-based, one statement; returns the number of hosts. The summary
    is a ranking hint only: claims re-check the ledger, so a refresh racing a claim cannot double-book."""
    with connection.cursor() as cur:
        cur.execute(REFRESH_ALL, {"now": clock.now()})
        return cur.rowcount


def register_consumer_resolver(consumer_type: str, fn: ConsumerResolver) -> None:
    """`fn(ids) -> set of the ids that still exist` for consumers of `consumer_type`."""
    _RESOLVERS[consumer_type] = fn


def ledger_audit(*, remove: bool = False) -> dict:
    """Report (and with `remove` release) live allocations whose consumer is gone.

    Returns ``{"orphaned": [consumer ids], "unchecked_types": [...], "released_rows": n}``."""
    now = clock.now()
    live = Allocation.objects.filter(Q(period__upper_inf=True) | Q(period__endswith__gt=now))
    by_type: dict[str, set] = {}
    for ctype, cid in live.values_list("consumer_type", "consumer_id").distinct():
        by_type.setdefault(ctype, set()).add(cid)
    orphaned, unchecked = [], []
    for ctype, ids in sorted(by_type.items()):
        resolver = _RESOLVERS.get(ctype)
        if resolver is None:
            unchecked.append(ctype)
            continue
        orphaned += sorted(ids - set(resolver(ids)), key=str)
    released = 0
    if remove:
        for cid in orphaned:
            released += allocations_release(consumer_id=cid)
    return {"orphaned": [str(c) for c in orphaned], "unchecked_types": unchecked, "released_rows": released}
