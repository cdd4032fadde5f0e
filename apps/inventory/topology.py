"""Network topology reads for placement: which leaf switches a host's ports reach and how far two hosts are.

Distance: the switch hops the hosts' ports need on one fabric — 0 same host, 1 same leaf
(on a rail-optimised fabric: every rail's leaf is shared), 2 leaves joined by a common spine, 3 beyond (core),
None when either host has no port on the fabric.

Readers that cache topology (placement, per process) compare `topology_stamp()` before reusing it; writers of
hosts, ports, switches or links (the fleet import) call `topology_changed()`.
"""
from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass

import redis
from django.core.cache import cache
from django.db import transaction
from django.db.models import Q

from .models import HcaPort, Nic, SwitchLink

#: Django cache key (Redis: one value for every web and worker process) of the topology stamp.
TOPOLOGY_STAMP_KEY = "inventory:topology-stamp"


def topology_changed() -> None:
    """Record that hosts or cabling changed: a new random stamp under `TOPOLOGY_STAMP_KEY` once the current
    transaction commits (at once outside one). A cache error is logged, not raised: the data is committed, and
    readers still expire their copies after their TTL."""
    transaction.on_commit(lambda: cache.set(TOPOLOGY_STAMP_KEY, uuid.uuid4().hex, timeout=None), robust=True)


def topology_stamp() -> str | None:
    """The current topology stamp (one cache get): a copy built under another stamp is stale. None before the
    first change, or when Redis does not answer (a reader then relies on its TTL)."""
    try:
        return cache.get(TOPOLOGY_STAMP_KEY)
    except redis.RedisError:
        return None


@dataclass(frozen=True)
class FabricTopology:
    """`leaves[host_id]` = set of leaf switch ids; `spines[leaf_id]` = set of switch ids one link above it."""

    leaves: dict
    spines: dict

    def distance(self, host_a, host_b) -> int | None:
        if host_a == host_b:
            return 0
        la, lb = self.leaves.get(host_a), self.leaves.get(host_b)
        if not la or not lb:
            return None
        if la & lb:
            return 1
        up_a = set().union(*(self.spines.get(leaf, set()) for leaf in la))
        up_b = set().union(*(self.spines.get(leaf, set()) for leaf in lb))
        return 2 if up_a & up_b else 3


def fabric_topology(fabric_id) -> FabricTopology:
    """Load one fabric's host->leaf and leaf->spine maps (three queries)."""
    leaves: dict = defaultdict(set)
    for host_id, leaf_id in HcaPort.objects.filter(fabric_id=fabric_id, leaf_switch__isnull=False).values_list(
            "host_id", "leaf_switch_id"):
        leaves[host_id].add(leaf_id)
    for host_id, switch_id in Nic.objects.filter(fabric_id=fabric_id, switch__isnull=False).values_list(
            "host_id", "switch_id"):
        leaves[host_id].add(switch_id)
    spines: dict = defaultdict(set)
    links = SwitchLink.objects.filter(Q(a_switch__fabric_id=fabric_id) | Q(b_switch__fabric_id=fabric_id))
    for a, a_role, b, b_role in links.values_list("a_switch_id", "a_switch__role", "b_switch_id", "b_switch__role"):
        if a_role == "leaf" and b_role != "leaf":
            spines[a].add(b)
        if b_role == "leaf" and a_role != "leaf":
            spines[b].add(a)
    return FabricTopology(leaves=dict(leaves), spines=dict(spines))
