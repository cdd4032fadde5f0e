"""Network topology for multi-host requests, and the cached static view of it.

A host's InfiniBand HCA ports give its fabric and, per rail, the leaf switch it hangs off (rail-optimised
SuperPOD cabling: rail r of every host of a scalable unit goes to that SU's rail-r leaf). A leaf's *spine group*
is the set of spine switches it is cabled to (`inventory.SwitchLink`); without cabling data it is the leaf's
scalable unit. A set of hosts is scored by ``(max over rails of distinct leaves, distinct spine groups)``,
lower is better (NVIDIA DGX SuperPOD reference architecture: traffic that stays under one leaf per rail takes
one switch hop; leaves under one spine group take three).

The view changes only when cabling changes, so it is cached in-process for ``PLACEMENT_TOPOLOGY_TTL_S`` seconds
(default 60), and reloaded sooner when the inventory's topology stamp (`apps.inventory.topology.topology_stamp`,
in Redis: one cache get per lookup) differs from the one it was loaded under, i.e. after a fleet import added or
changed hosts, ports, switches or links in any process. `topology_cache_clear()` drops it. Loading it is two
aggregate queries (one row per host and per leaf), about a second on 10,000 hosts.

NVLink domains (`host_nvlink_domains`, cached the same way): a host's GPUs name the NVLink domain they share
(`inventory.Gpu.nvlink_domain`): one per host on HGX boards (its NVSwitches), one per rack for multi-node NVLink
systems (GB200 NVL72: the 18 compute trays of a rack share one domain). ``max_nvlink_domains`` limits a gang to
that many domains; only hosts with a domain qualify.
"""
from __future__ import annotations

import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from apps.inventory.topology import topology_stamp

from .request import TopologyConstraint


@dataclass(frozen=True)
class HostTopo:
    fabric_id: uuid.UUID | None
    leaves: tuple[tuple[int, uuid.UUID], ...]  # (rail, leaf switch id), sorted by rail
    spine_groups: frozenset  # spine-group keys of its leaves


_CACHE: dict = {"at": 0.0, "data": None, "stamp": None}

#: One row per (host, IB fabric): its cabled rails as "rail:leaf,..." text (cheap to ship for 10,000 hosts).
_TOPO_SQL = """
SELECT p.host_id, p.fabric_id, count(*),
       string_agg(coalesce(p.rail, -1)::text || ':' || p.leaf_switch_id::text, ',' ORDER BY p.rail, p.leaf_switch_id)
FROM inventory_hcaport p JOIN inventory_fabric f ON f.id = p.fabric_id
WHERE f.kind = 'infiniband' AND p.leaf_switch_id IS NOT NULL
GROUP BY p.host_id, p.fabric_id
"""
#: Per leaf switch: its scalable unit and the spines it is cabled to.
_LEAVES_SQL = """
SELECT s.id, s.scalable_unit_id,
       array_agg(DISTINCT CASE WHEN l.a_switch_id = s.id THEN l.b_switch_id ELSE l.a_switch_id END)
         FILTER (WHERE sp.id IS NOT NULL)
FROM inventory_switch s
LEFT JOIN inventory_switchlink l ON l.a_switch_id = s.id OR l.b_switch_id = s.id
LEFT JOIN inventory_switch sp ON sp.role = 'spine'
  AND sp.id = CASE WHEN l.a_switch_id = s.id THEN l.b_switch_id ELSE l.a_switch_id END
WHERE s.role = 'leaf'
GROUP BY s.id, s.scalable_unit_id
"""


#: Per host with NVLink GPUs: the NVLink domain most of its GPUs name (a host's GPUs share one in practice).
_NVLINK_SQL = """
SELECT DISTINCT ON (g.host_id) g.host_id, g.nvlink_domain FROM inventory_gpu g WHERE g.nvlink_domain <> ''
GROUP BY g.host_id, g.nvlink_domain ORDER BY g.host_id, count(*) DESC, g.nvlink_domain
"""
_NVLINK: dict = {"at": 0.0, "data": None, "stamp": None}


def topology_cache_clear() -> None:
    _CACHE["data"] = None
    _NVLINK["data"] = None


def host_nvlink_domains() -> dict[uuid.UUID, str]:
    """host id -> its NVLink domain, for every host whose GPUs name one (cached like `host_topology`)."""
    ttl = getattr(settings, "PLACEMENT_TOPOLOGY_TTL_S", 60)
    stamp = topology_stamp()
    if _NVLINK["data"] is not None and _NVLINK["stamp"] == stamp and time.monotonic() - _NVLINK["at"] < ttl:
        return _NVLINK["data"]
    with connection.cursor() as cur:
        cur.execute(_NVLINK_SQL)
        data = {host_id: sys.intern(domain) for host_id, domain in cur.fetchall()}
    _NVLINK.update(at=time.monotonic(), data=data, stamp=stamp)
    return data


def host_topology() -> dict[uuid.UUID, HostTopo]:
    """host id -> `HostTopo` for every host with cabled IB ports (cached; see the module docstring)."""
    ttl = getattr(settings, "PLACEMENT_TOPOLOGY_TTL_S", 60)
    stamp = topology_stamp()  # read before loading: a change committed meanwhile reloads on the next lookup
    if _CACHE["data"] is not None and _CACHE["stamp"] == stamp and time.monotonic() - _CACHE["at"] < ttl:
        return _CACHE["data"]
    with connection.cursor() as cur:
        cur.execute(_LEAVES_SQL)
        group_of = {leaf: (frozenset(spines) if spines else ("su", su)) for leaf, su, spines in cur.fetchall()}
        cur.execute(_TOPO_SQL)
        rows = cur.fetchall()
    best: dict = {}
    for host_id, fabric_id, n, cabling in rows:  # a host on several IB fabrics: the one with most ports
        if host_id not in best or n > best[host_id][1]:
            best[host_id] = (fabric_id, n, cabling)
    data = {}
    interned: dict = {}
    for host_id, (fabric_id, _n, cabling) in best.items():
        key = (fabric_id, cabling)
        if key not in interned:  # hosts of one scalable unit share one object
            leaves = []
            for item in cabling.split(","):
                rail, leaf = item.split(":", 1)
                leaves.append((int(rail), uuid.UUID(leaf)))
            groups = frozenset(group_of.get(leaf, ("leaf", leaf)) for _, leaf in leaves)
            interned[key] = HostTopo(fabric_id, tuple(sorted(set(leaves), key=lambda x: (x[0], str(x[1])))),
                                     groups)
        data[host_id] = interned[key]
    _CACHE.update(at=time.monotonic(), data=data, stamp=stamp)
    return data


def set_score(hosts: list[uuid.UUID], topo: dict[uuid.UUID, HostTopo]) -> tuple[int, int, int]:
    """(max distinct leaves on any rail, distinct spine groups, distinct fabrics) of a host set."""
    per_rail: dict = defaultdict(set)
    groups: set = set()
    fabrics: set = set()
    for h in hosts:
        t = topo.get(h)
        if t is None:
            fabrics.add(None)
            per_rail[-99].add(h)  # an uncabled host counts as its own leaf
            continue
        fabrics.add(t.fabric_id)
        groups |= t.spine_groups
        for rail, leaf in t.leaves:
            per_rail[rail].add(leaf)
    return (max((len(v) for v in per_rail.values()), default=0), len(groups), len(fabrics))


def set_refusal(hosts: list[uuid.UUID], constraint: TopologyConstraint,
                topo: dict[uuid.UUID, HostTopo] | None = None) -> str:
    """Why the host set `hosts` breaks `constraint`, as a short phrase ('' when it meets it): ``one_fabric`` and a
    host on no or another InfiniBand fabric, more distinct leaves on a rail than ``max_leaves_per_rail``, more
    spine groups than ``max_spine_groups`` (`set_score`'s measures), a host without an NVLink domain or more
    domains than ``max_nvlink_domains`` (`host_nvlink_domains`). Used where some hosts of a gang are fixed and one
    more is chosen (a cluster member's re-place)."""
    topo = host_topology() if topo is None else topo
    leaves, spines, fabrics = set_score(hosts, topo)
    if constraint.one_fabric and (fabrics > 1 or any(h not in topo for h in hosts)):
        return "not on the gang's InfiniBand fabric"
    if constraint.max_leaves_per_rail and leaves > constraint.max_leaves_per_rail:
        return f"more than {constraint.max_leaves_per_rail} leaves on a rail with the gang"
    if constraint.max_spine_groups and spines > constraint.max_spine_groups:
        return f"more than {constraint.max_spine_groups} spine groups with the gang"
    if constraint.max_nvlink_domains:
        domain_of = host_nvlink_domains()
        if any(h not in domain_of for h in hosts):
            return "no NVLink domain"
        if len({domain_of[h] for h in hosts}) > constraint.max_nvlink_domains:
            return f"more than {constraint.max_nvlink_domains} NVLink domains with the gang"
    return ""


def _greedy(groups: list[list[uuid.UUID]], n: int) -> list[uuid.UUID] | None:
    """Fill from the largest leaf groups first (fewest groups => fewest leaves per rail)."""
    chosen: list[uuid.UUID] = []
    for g in sorted(groups, key=len, reverse=True):
        chosen.extend(g[: n - len(chosen)])
        if len(chosen) == n:
            return chosen
    return None


def _options(hosts: list[uuid.UUID], n: int, topo: dict, policy: str) -> list[list[uuid.UUID]]:
    """Candidate host sets inside one fabric: every single leaf group that fits, then greedy fills per spine
    group and across the fabric. `hosts` is ranked best first; the order inside a group is kept."""
    by_sig: dict = defaultdict(list)
    for h in hosts:
        by_sig[topo[h].leaves].append(h)
    groups = list(by_sig.values())
    fits = [g for g in groups if len(g) >= n]
    # binpack: the tightest leaf group that fits; spread: the roomiest
    fits.sort(key=lambda g: (len(g) if policy != "spread" else -len(g)))
    options = [g[:n] for g in fits[:3]]
    by_spine: dict = defaultdict(list)
    for g in groups:
        by_spine[topo[g[0]].spine_groups].append(g)
    for gs in by_spine.values():
        pick = _greedy(gs, n)
        if pick:
            options.append(pick)
    pick = _greedy(groups, n)
    if pick:
        options.append(pick)
    return options


def select_hosts(ranked: list[uuid.UUID], n: int, constraint: TopologyConstraint, policy: str
                 ) -> tuple[list[uuid.UUID] | None, dict]:
    """Choose `n` of the `ranked` hosts minimising (leaves per rail, spine groups) inside one IB fabric.

    Returns (hosts, info) or (None, info) where info says what the best achievable set would have scored and
    which limit it broke. Hard limits come from `constraint`; without them a set spanning fabrics or uncabled
    hosts is the last resort. With ``max_nvlink_domains`` the hosts are first grouped by NVLink domain and the
    set is chosen inside one domain (or, for k > 1, inside each domain that holds `n` hosts alone and inside the
    k largest together); info then has ``nvlink_domains``."""
    if not constraint.max_nvlink_domains:
        return _select(ranked, n, constraint, policy)
    k = constraint.max_nvlink_domains
    domain_of = host_nvlink_domains()
    by_domain: dict = defaultdict(list)
    for h in ranked:
        if h in domain_of:
            by_domain[domain_of[h]].append(h)
    groups = [hosts for hosts in by_domain.values() if len(hosts) >= n]
    if k > 1:
        largest = sorted(by_domain.values(), key=len, reverse=True)[:k]
        union = {h for hosts in largest for h in hosts}
        if len(union) >= n:
            groups.append([h for h in ranked if h in union])
    if not groups:
        biggest = max(map(len, by_domain.values()), default=0)
        where = "no NVLink domain holds" if k == 1 else f"no {k} NVLink domains together hold"
        unnamed = len(ranked) - sum(map(len, by_domain.values()))
        return None, {"constraint": "max_nvlink_domains",
                      "reason": f"{where} {n} suitable hosts (largest domain: {biggest}"
                                + (f"; {unnamed} hosts have no NVLink domain)" if unnamed else ")")}
    best: tuple | None = None
    for hosts in groups:
        picked, info = _select(hosts, n, constraint, policy)
        key = (picked is None, info.get("max_leaves_per_rail", 0), info.get("spine_groups", 0))
        if best is None or key < best[0]:
            best = (key, picked, info)
    _, picked, info = best
    if picked is not None:
        info = {**info, "nvlink_domains": len({domain_of[h] for h in picked})}
    return picked, info


def _select(ranked: list[uuid.UUID], n: int, constraint: TopologyConstraint, policy: str
            ) -> tuple[list[uuid.UUID] | None, dict]:
    """`select_hosts` without the NVLink-domain limit."""
    topo = host_topology()
    by_fabric: dict = defaultdict(list)
    for h in ranked:
        by_fabric[topo[h].fabric_id if h in topo else None].append(h)
    best: tuple | None = None
    for fabric, hosts in by_fabric.items():
        if fabric is None or len(hosts) < n:
            continue
        for option in _options(hosts, n, topo, policy):
            key = set_score(option, topo)
            if best is None or key < best[0]:
                best = (key, option)
    if best is None and not constraint.is_set and len(ranked) >= n:
        option = ranked[:n]
        best = (set_score(option, topo), option)
    if best is None:
        largest = max((len(v) for f, v in by_fabric.items() if f is not None), default=0)
        return None, {"reason": f"no InfiniBand fabric has {n} suitable hosts (largest: {largest})",
                      "constraint": "one_fabric"}
    (leaves, spines, fabrics), hosts = best
    info = {"max_leaves_per_rail": leaves, "spine_groups": spines, "fabrics": fabrics}
    if constraint.max_leaves_per_rail and leaves > constraint.max_leaves_per_rail:
        return None, {**info, "constraint": "max_leaves_per_rail",
                      "reason": f"the tightest {n}-host set needs {leaves} leaves on a rail "
                                f"(limit {constraint.max_leaves_per_rail})"}
    if constraint.max_spine_groups and spines > constraint.max_spine_groups:
        return None, {**info, "constraint": "max_spine_groups",
                      "reason": f"the tightest {n}-host set spans {spines} spine groups "
                                f"(limit {constraint.max_spine_groups})"}
    return hosts, info
